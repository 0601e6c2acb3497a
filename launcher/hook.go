package launcher

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// EnvPrefix starts the name of every environment variable ccrelay reads
// (CCRELAY_TOKEN, ...). Claude is started without any of them: every tool
// Claude runs sees its environment, and some hold credentials.
const EnvPrefix = "CCRELAY_"

// EnvRelayed is set (to 1) in the environment of every Claude ccrelay
// runs. It is no secret: it says only that a ccrelay follows the session,
// so that the hook of ccrelay follow install, which Claude runs too, leaves
// the session to that ccrelay instead of following it a second time.
const EnvRelayed = "RELAYED_BY_CCRELAY"

// claudeEnv is env without ccrelay's own variables (nil: this process's
// environment), marked with EnvRelayed.
func claudeEnv(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvPrefix) && !strings.HasPrefix(kv, EnvRelayed+"=") {
			out = append(out, kv)
		}
	}
	return append(out, EnvRelayed+"=1")
}

// SessionStart is what Claude's SessionStart hook reports.
type SessionStart struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	Source         string `json:"source"` // startup, resume, clear, compact
}

// hookServer receives SessionStart hooks on 127.0.0.1, from callers that
// know the per-run token.
type hookServer struct {
	url   string
	token string
	srv   *http.Server
	log   *slog.Logger
}

func startHookServer(onSession func(SessionStart), log *slog.Logger) (*hookServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("hook endpoint: %w", err)
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		ln.Close()
		return nil, fmt.Errorf("hook token: %w", err)
	}
	h := &hookServer{url: "http://" + ln.Addr().String() + "/hook/session-start", token: hex.EncodeToString(secret[:]), log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook/session-start", func(w http.ResponseWriter, r *http.Request) {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(h.token)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var s SessionStart
		body, err := io.ReadAll(io.LimitReader(r.Body, maxHookBody))
		if err != nil || json.Unmarshal(body, &s) != nil || s.SessionID == "" {
			h.log.Warn("SessionStart hook sent no session id", "body", clip(string(body), 200))
			http.Error(w, "no session_id", http.StatusBadRequest)
			return
		}
		if !ValidSessionID(s.SessionID) {
			// It would reach Claude's command line (--resume=<id>) and
			// name files: only Claude's own form is taken.
			h.log.Warn("SessionStart hook sent a session id that is not a UUID; ignored", "session_id", clip(s.SessionID, 100))
			http.Error(w, "session_id is not a UUID", http.StatusBadRequest)
			return
		}
		onSession(s)
		io.WriteString(w, "ok")
	})
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	go h.srv.Serve(ln)
	return h, nil
}

// maxHookBody bounds what the hook endpoint reads of one request.
const maxHookBody = 1 << 20

// clip shortens s for a log line.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (h *hookServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h.srv.Shutdown(ctx)
}

// hookFile is what the hook command needs to reach ccrelay. It is written
// 0600 in the run's 0700 folder and named on the hook's command line (in
// the --settings file): the per-run token is never in Claude's
// environment, where every tool Claude runs could read it.
type hookFile struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// maxHookFile bounds what the hook command reads of its hook file.
const maxHookFile = 4 << 10

// TakeSettings removes every --settings option (--settings X or
// --settings=X) from args and returns the value of the last one, which is
// the one Claude would have used ("" when there is none).
func TakeSettings(args []string) (value string, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return value, append(rest, args[i:]...)
		case strings.HasPrefix(a, "--settings="):
			value = strings.TrimPrefix(a, "--settings=")
		case a == "--settings" && i+1 < len(args):
			i++
			value = args[i]
		default:
			rest = append(rest, a)
		}
	}
	return value, rest
}

// userSettings reads the settings the user gave with --settings, as Claude
// takes them: a JSON object, or the path of a file holding one (relative
// to dir; "": the working directory). "" is no settings.
func userSettings(value, dir string) (map[string]any, error) {
	if value == "" {
		return map[string]any{}, nil
	}
	b := []byte(value)
	if !strings.HasPrefix(strings.TrimSpace(value), "{") {
		path := value
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("--settings: %w", err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("--settings %s: not a JSON object: %w", clip(value, 100), err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// mergeHook adds a hook command for event to settings, after the hooks the
// settings already have for it.
func mergeHook(settings map[string]any, event string, entry map[string]any) error {
	hooks, ok := settings["hooks"].(map[string]any)
	if settings["hooks"] != nil && !ok {
		return errors.New("--settings: hooks is not an object")
	}
	if hooks == nil {
		hooks = map[string]any{}
		settings["hooks"] = hooks
	}
	list, ok := hooks[event].([]any)
	if hooks[event] != nil && !ok {
		return fmt.Errorf("--settings: hooks.%s is not a list", event)
	}
	hooks[event] = append(list, map[string]any{
		"matcher": "*",
		"hooks":   []any{entry},
	})
	return nil
}

// hookDirPrefix names a run's hook folder (a random suffix follows). In a
// slot of the state folder, one left by a run that was killed is removed
// by the next claim of the slot (ClaimRunDir).
const hookDirPrefix = "ccrelay-hook-"

// writeSettings writes the --settings file that installs the SessionStart
// hook, and the hook file it names, in a fresh 0700 folder in parent ("":
// the system's temporary folder). It returns the settings file and a
// cleanup.
func writeSettings(parent string, hookCommand []string, h *hookServer) (string, func(), error) {
	return writeMergedSettings(parent, map[string]any{}, hookCommand, h, nil, nil)
}

// writeMergedSettings is writeSettings with the user's own settings (from
// their --settings), to which the hook is added: Claude takes only the last
// --settings it is given, so ccrelay's must carry the user's. With sl,
// ccrelay's status line replaces the user's (userSL), which it runs first.
func writeMergedSettings(parent string, settings map[string]any, hookCommand []string, h *hookServer, sl *StatusLine, userSL any) (string, func(), error) {
	dir, err := os.MkdirTemp(parent, hookDirPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("hook settings: %w", err)
	}
	fail := func(err error) (string, func(), error) {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("hook settings: %w", err)
	}
	hf, _ := json.Marshal(hookFile{URL: h.url, Token: h.token})
	hookPath := filepath.Join(dir, "hook.json")
	if err := writePrivate(hookPath, hf); err != nil {
		return fail(err)
	}
	argv := append(append([]string(nil), hookCommand...), hookPath)
	if err := mergeHook(settings, "SessionStart", hookEntry(hookOS, argv)); err != nil {
		return fail(err)
	}
	if sl != nil {
		if err := addStatusLine(settings, dir, *sl, userSL, hookOS); err != nil {
			return fail(err)
		}
	}
	b, err := json.Marshal(settings)
	if err != nil {
		return fail(err)
	}
	path := filepath.Join(dir, "settings.json")
	if err := writePrivate(path, b); err != nil {
		return fail(err)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// writePrivate creates path with mode 0600, whatever the umask.
func writePrivate(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ForwardHook is the hook command's side: it reads the hook input from in
// and posts it to the ccrelay that started Claude, found in the hook file
// ccrelay named on the hook's command line. It never fails Claude: errors
// are returned for logging only.
func ForwardHook(ctx context.Context, in io.Reader, file string) error {
	if file == "" {
		return errors.New("not started by ccrelay (no hook file given)")
	}
	hf, err := readHookFile(file)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(in, maxHookBody))
	if err != nil {
		return fmt.Errorf("read hook input: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hf.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+hf.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("post hook: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("post hook: %s", resp.Status)
	}
	return nil
}

// readHookFile reads the hook file, refusing one that others may read.
func readHookFile(path string) (*hookFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hook file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("hook file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("hook file %s is readable by others (mode %04o): not used", path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxHookFile+1))
	if err != nil {
		return nil, fmt.Errorf("hook file: %w", err)
	}
	var hf hookFile
	if len(b) > maxHookFile || json.Unmarshal(b, &hf) != nil || hf.URL == "" || hf.Token == "" {
		return nil, fmt.Errorf("hook file %s is not ccrelay's", path)
	}
	return &hf, nil
}
