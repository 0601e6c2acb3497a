package launcher

import (
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

// Environment variables through which Claude's SessionStart hook reaches
// ccrelay. Claude passes its environment to the hook commands it runs.
const (
	EnvHookURL   = "CCRELAY_HOOK_URL"
	EnvHookToken = "CCRELAY_HOOK_TOKEN"
)

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

// writeSettings writes the --settings file that installs the SessionStart
// hook, in a fresh 0700 folder. It returns the file and a cleanup.
func writeSettings(hookCommand []string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "ccrelay-hook-")
	if err != nil {
		return "", nil, fmt.Errorf("hook settings: %w", err)
	}
	quoted := make([]string, len(hookCommand))
	for i, a := range hookCommand {
		quoted[i] = shellQuote(a)
	}
	settings := map[string]any{"hooks": map[string]any{"SessionStart": []any{map[string]any{
		"matcher": "*",
		"hooks":   []any{map[string]any{"type": "command", "command": strings.Join(quoted, " ")}},
	}}}}
	b, _ := json.Marshal(settings)
	path := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("hook settings: %w", err)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ForwardHook is the hook command's side: it reads the hook input from in
// and posts it to the ccrelay that started Claude. It never fails Claude:
// errors are returned for logging only.
func ForwardHook(ctx context.Context, in io.Reader, getenv func(string) string) error {
	url, token := getenv(EnvHookURL), getenv(EnvHookToken)
	if url == "" || token == "" {
		return errors.New("not started by ccrelay (no " + EnvHookURL + ")")
	}
	body, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return fmt.Errorf("read hook input: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
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
