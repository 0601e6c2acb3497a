package launcher

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A scripted stand-in for `codex app-server`: the test binary run with
// fakeAppServerEnv set (TestMain). It answers initialize, thread/start
// and thread/resume; on turn/start it plays the script's steps
// (notifications, requests it waits to be answered, raw lines), then ends
// the turn (unless Hang: then only turn/interrupt ends it). Every line the
// client writes is appended to the log file, for the test to read.

const (
	fakeAppServerEnv    = "FAKE_CODEX_APPSERVER"
	fakeAppServerScript = "FAKE_CODEX_APPSERVER_SCRIPT"
	fakeAppServerLog    = "FAKE_CODEX_APPSERVER_LOG"
	fakeThreadID        = "01a21c00-53f4-7513-90cd-7879df4a4931"
)

type fakeStep struct {
	Notify  string          `json:"notify,omitempty"`
	Request string          `json:"request,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	// Raw is written as it is (a request as its line: ID is its id).
	Raw string `json:"raw,omitempty"`
	ID  int    `json:"id,omitempty"`
	// Exit ends the fake app-server there (a crash), once per script: a
	// marker file beside the log says it happened.
	Exit bool `json:"exit,omitempty"`
}

type fakeScript struct {
	Steps []fakeStep `json:"steps"`
	Hang  bool       `json:"hang"`
	// Path is the thread's rollout as thread/start and thread/resume
	// give it ("": none, null).
	Path string `json:"path,omitempty"`
}

func runFakeAppServer() int {
	var sc fakeScript
	if b, err := os.ReadFile(os.Getenv(fakeAppServerScript)); err == nil {
		if err := json.Unmarshal(b, &sc); err != nil {
			fmt.Fprintln(os.Stderr, "fake app-server: bad script:", err)
			return 2
		}
	}
	logf, err := os.OpenFile(os.Getenv(fakeAppServerLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake app-server:", err)
		return 2
	}
	defer logf.Close()
	out := bufio.NewWriter(os.Stdout)
	write := func(v any) {
		var b []byte
		if s, ok := v.(string); ok {
			b = []byte(s)
		} else {
			b, _ = json.Marshal(v)
		}
		out.Write(append(b, '\n'))
		out.Flush()
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	turns := 0
	turn := ""
	step := -1    // the step of the running turn to play next (-1: none)
	waitFor := -1 // the id of the request whose answer is awaited
	play := func() {
		for step >= 0 && waitFor < 0 {
			if step >= len(sc.Steps) {
				step = -1
				if !sc.Hang {
					write(map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": fakeThreadID,
						"turn": map[string]any{"id": turn, "status": "completed", "items": []any{}}}})
					turn = ""
				}
				return
			}
			s := sc.Steps[step]
			step++
			switch {
			case s.Raw != "":
				write(s.Raw)
				if s.ID > 0 {
					waitFor = s.ID
				}
			case s.Exit:
				marker := os.Getenv(fakeAppServerLog) + ".exited"
				if _, err := os.Stat(marker); err != nil {
					os.WriteFile(marker, nil, 0o600)
					os.Exit(3)
				}
			case s.Notify != "":
				write(map[string]any{"method": s.Notify, "params": s.Params})
			case s.Request != "":
				waitFor = 100 + step
				write(map[string]any{"method": s.Request, "id": waitFor, "params": s.Params})
			}
		}
	}
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		logf.Write(line)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		switch m.Method {
		case "":
			if waitFor >= 0 && string(m.ID) == fmt.Sprint(waitFor) {
				write(map[string]any{"method": "serverRequest/resolved", "params": map[string]any{"threadId": fakeThreadID, "requestId": waitFor}})
				waitFor = -1
				play()
			}
		case "initialize":
			write(fmt.Sprintf(`{"id":%s,"result":{"userAgent":"fake","codexHome":"/nowhere","platformFamily":"unix","platformOs":"linux"}}`, m.ID))
			write(`{"method":"configWarning","params":{"summary":"a warning before the thread","details":null}}`)
		case "initialized":
		case "thread/start", "thread/resume":
			path := "null"
			if sc.Path != "" {
				path = strconv.Quote(sc.Path)
			}
			write(fmt.Sprintf(`{"id":%s,"result":{"thread":{"id":%q,"path":%s,"cwd":"/p","cliVersion":"0.169.0"},"model":"gpt-5.5","approvalPolicy":"on-request","sandbox":{"type":"readOnly"}}}`, m.ID, fakeThreadID, path))
		case "turn/start":
			turns++
			turn = fmt.Sprintf("turn-%d", turns)
			write(fmt.Sprintf(`{"id":%s,"result":{"turn":{"id":%q,"status":"inProgress","items":[]}}}`, m.ID, turn))
			write(map[string]any{"method": "turn/started", "params": map[string]any{"threadId": fakeThreadID,
				"turn": map[string]any{"id": turn, "status": "inProgress", "items": []any{}}}})
			step = 0
			play()
		case "turn/steer":
			if turn == "" {
				write(fmt.Sprintf(`{"id":%s,"error":{"code":-32600,"message":"no active turn"}}`, m.ID))
			} else {
				write(fmt.Sprintf(`{"id":%s,"result":{"turnId":%q}}`, m.ID, turn))
			}
		case "turn/interrupt":
			write(fmt.Sprintf(`{"id":%s,"result":{}}`, m.ID))
			if turn != "" {
				write(map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": fakeThreadID,
					"turn": map[string]any{"id": turn, "status": "interrupted", "items": []any{}}}})
				turn, step, waitFor = "", -1, -1
			}
		default:
			write(fmt.Sprintf(`{"id":%s,"error":{"code":-32600,"message":"unknown method %s"}}`, m.ID, strings.ReplaceAll(m.Method, `"`, "")))
		}
	}
}
