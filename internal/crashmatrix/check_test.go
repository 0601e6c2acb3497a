//go:build linux

package crashmatrix

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// nextAnswered sends the next prompt from the phone and waits until Claude
// answered it and its turn ended; it returns the prompt's command id.
func (r *rig) nextAnswered() string {
	r.t.Helper()
	return r.answered(r.prompt(nextPrompt))
}

// answered waits until the next prompt (sent as command id) was answered
// and its turn ended.
func (r *rig) answered(id string) string {
	r.t.Helper()
	return r.answeredWith(id, nextAnswer)
}

// answeredWith waits until the prompt sent as command id was answered with
// answer and its turn ended.
func (r *rig) answeredWith(id, answer string) string {
	r.t.Helper()
	r.phone.until("the answer "+answer, func() bool {
		if !r.phone.sawText(protocol.RoleAgent, answer) {
			return false
		}
		last := r.phone.envs[len(r.phone.envs)-1]
		return last.Ev.T == protocol.KindTurnEnd
	})
	if st, msg := r.phone.answered(id); st != protocol.StatusDone {
		r.t.Errorf("the prompt answered %q is %s %s", answer, st, msg)
	}
	return id
}

// daemonNext is the next prompt after the daemon came back: the session
// is resumed from the phone and prompted, or, when Claude wrote no
// transcript to resume, started again with the prompt.
func (r *rig) daemonNext() {
	r.t.Helper()
	if _, err := os.Stat(filepath.Join(r.env.ProjectDir(r.t), r.session+".jsonl")); err != nil {
		r.answered(r.phone.command(r.machine, protocol.Command{Kind: protocol.CommandStart, Dir: r.env.Project, Target: r.session, Text: nextPrompt, Mode: "default"}))
		return
	}
	if st, msg := r.phone.answered(r.phone.command(r.machine, protocol.Command{Kind: protocol.CommandStart, Dir: r.env.Project, Target: r.session, Resume: true})); st != protocol.StatusDone {
		r.t.Fatalf("resume: %s %s\n%s", st, msg, r.output())
	}
	r.nextAnswered()
}

// notBusyWithoutClaude checks that the relay's list stops saying busy (or
// waiting for a permission) once no Claude runs for the session.
func (r *rig) notBusyWithoutClaude(what string) {
	r.t.Helper()
	ok := r.phone.within("the listed status", 30*time.Second, func() bool {
		s, _ := r.phone.info(r.session)["status"].(string)
		return s != "busy" && s != "waiting-for-permission"
	})
	if !ok {
		r.t.Errorf("%s: the relay lists the session %q 30 s later, with no Claude running", what, r.phone.status())
	}
}

// transcripts are the project's transcripts, oldest first.
func (r *rig) transcripts() []string {
	files, _ := filepath.Glob(filepath.Join(r.env.ProjectDir(r.t), "*.jsonl"))
	first := func(f string) string {
		fh, err := os.Open(f)
		if err != nil {
			return ""
		}
		defer fh.Close()
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var rec struct {
				Timestamp string `json:"timestamp"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Timestamp != "" {
				return rec.Timestamp
			}
		}
		return ""
	}
	slices.SortFunc(files, func(a, b string) int { return strings.Compare(first(a), first(b)) })
	return files
}

// replay is `ccrelay replay` of the project's transcripts, one after the
// other.
func (r *rig) replay() []protocol.Envelope {
	r.t.Helper()
	return r.replayFiles(r.transcripts())
}

// replayOf is `ccrelay replay` of the followed session's transcript.
func (r *rig) replayOf() []protocol.Envelope {
	r.t.Helper()
	var files []string
	for _, f := range r.transcripts() {
		if filepath.Base(f) == r.session+".jsonl" {
			files = append(files, f)
		}
	}
	return r.replayFiles(files)
}

func (r *rig) replayFiles(files []string) []protocol.Envelope {
	r.t.Helper()
	var out []protocol.Envelope
	for _, f := range files {
		cmd := exec.Command(binary, "replay", "--format", "jsonl", "-q", f)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			r.t.Fatalf("replay %s: %v\n%s", f, err, se.String())
		}
		for _, l := range bytes.Split(bytes.TrimSpace(so.Bytes()), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			var e protocol.Envelope
			if err := json.Unmarshal(l, &e); err != nil {
				r.t.Fatalf("replay %s: %v", f, err)
			}
			out = append(out, e)
		}
	}
	return out
}

// check is what every case ends with, once the next prompt was answered:
// live = replay by id and order, one end per tool call, at most one open
// turn, every command's status final and true, the list status idle.
func (r *rig) check() {
	r.t.Helper()
	live := r.phone.envelopes()
	want := r.replayOf()
	r.liveIsReplay(live, want)
	r.oneEndPerCall(live)
	r.oneOpenTurn(live)
	r.statusesTrue(r.replay())
	// The state follows the turn's end (it is announced once the turn-end
	// is stored).
	idle := r.phone.within("the session listed idle", 30*time.Second, func() bool {
		s, _ := r.phone.info(r.session)["status"].(string)
		return s == "idle" && len(r.permissions()) == 0
	})
	if !idle {
		r.phone.mu.Lock()
		n := len(r.permissions())
		r.phone.mu.Unlock()
		r.t.Errorf("the relay lists the session %q with %d permission requests 30 s after its last turn", r.phone.status(), n)
	}
	if r.t.Failed() {
		r.t.Logf("live:   %s\nreplay: %s\n%s", describe(live), describe(want), r.output())
	} else {
		r.t.Logf("live = replay: %s", describe(live))
	}
}

// liveIsReplay: the same envelopes (by id, kind and a turn's status) in
// the same order. Live may have more: its last turn's end (the transcript
// does not say the last turn ended), notes replay cannot have (a
// conversation cleared), and, once, the run of envelopes of a message
// Claude printed and was killed before writing.
func (r *rig) liveIsReplay(live, want []protocol.Envelope) {
	r.t.Helper()
	inReplay := map[string]protocol.Envelope{}
	for _, e := range want {
		inReplay[e.ID] = e
	}
	inLive := map[string]int{}
	for i, e := range live {
		if j, dup := inLive[e.ID]; dup {
			r.t.Errorf("live has envelope %s twice (%d and %d)", e.ID, j, i)
		}
		inLive[e.ID] = i
	}
	var common []string
	var extra []int
	for i, e := range live {
		w, ok := inReplay[e.ID]
		if !ok {
			if i == len(live)-1 && e.Ev.T == protocol.KindTurnEnd {
				continue
			}
			if e.Ev.T == protocol.KindService && strings.HasPrefix(e.Ev.Text, "Conversation cleared") {
				continue
			}
			extra = append(extra, i)
			continue
		}
		common = append(common, e.ID)
		if w.Ev.T != e.Ev.T || w.Ev.Status != e.Ev.Status || w.Turn != e.Turn {
			r.t.Errorf("envelope %s: live %s (turn %s), replay %s (turn %s)", e.ID, describeOne(e), e.Turn, describeOne(w), w.Turn)
		}
	}
	var missing []string
	for _, w := range want {
		if _, ok := inLive[w.ID]; !ok {
			missing = append(missing, describeOne(w))
		}
	}
	if len(missing) > 0 {
		r.t.Errorf("live lacks %d envelopes of replay: %s", len(missing), strings.Join(missing, " "))
	}
	var order []string
	for _, w := range want {
		if _, ok := inLive[w.ID]; ok {
			order = append(order, w.ID)
		}
	}
	if !slices.Equal(order, common) {
		r.t.Errorf("live and replay hold the same envelopes in another order")
	}
	if len(extra) > 0 {
		var d []string
		for _, i := range extra {
			d = append(d, describeOne(live[i]))
		}
		if extra[len(extra)-1]-extra[0] != len(extra)-1 {
			r.t.Errorf("live has envelopes replay has not, in more than one run: %s", strings.Join(d, " "))
		} else {
			r.t.Logf("live has one run of envelopes replay has not (printed, not written, before the crash): %s", strings.Join(d, " "))
		}
	}
}

// oneEndPerCall: every tool call that started ends exactly once, and
// nothing ends that did not start.
func (r *rig) oneEndPerCall(live []protocol.Envelope) {
	r.t.Helper()
	starts, ends := map[string]int{}, map[string]int{}
	for _, e := range live {
		switch e.Ev.T {
		case protocol.KindToolCallStart:
			starts[e.Ev.Call]++
		case protocol.KindToolCallEnd:
			ends[e.Ev.Call]++
		}
	}
	for c, n := range starts {
		if n != 1 || ends[c] != 1 {
			r.t.Errorf("tool call %s: %d starts, %d ends", c, n, ends[c])
		}
	}
	for c, n := range ends {
		if starts[c] == 0 {
			r.t.Errorf("tool call %s: %d ends and no start", c, n)
		}
	}
}

// oneOpenTurn: turns never overlap, nothing of a turn comes after its end,
// and the last one is closed.
func (r *rig) oneOpenTurn(live []protocol.Envelope) {
	r.t.Helper()
	open := ""
	ended := map[string]bool{}
	for i, e := range live {
		if e.Role != protocol.RoleAgent {
			continue
		}
		if ended[e.Turn] {
			r.t.Errorf("envelope %d (%s) belongs to turn %s, which ended before it", i, describeOne(e), e.Turn)
		}
		switch e.Ev.T {
		case protocol.KindTurnStart:
			if open != "" {
				r.t.Errorf("envelope %d: turn %s opens while turn %s is open", i, e.Turn, open)
			}
			open = e.Turn
		case protocol.KindTurnEnd:
			if e.Turn != open {
				r.t.Errorf("envelope %d: turn %s ends, the open turn is %q", i, e.Turn, open)
			}
			ended[e.Turn], open = true, ""
		default:
			if e.Turn != open {
				r.t.Errorf("envelope %d (%s) of turn %s, the open turn is %q", i, describeOne(e), e.Turn, open)
			}
		}
	}
	if open != "" {
		r.t.Errorf("turn %s is still open at the end", open)
	}
}

// statusesTrue: every command the phone sent ends done or rejected, and
// truly: a prompt Claude took (its text is a prompt of the transcript) is
// done, once; a prompt it never took is not done.
func (r *rig) statusesTrue(replay []protocol.Envelope) {
	r.t.Helper()
	taken, echoed := map[string]int{}, map[string]bool{}
	for _, e := range replay {
		if e.Role == protocol.RoleUser && e.Ev.T == protocol.KindText {
			taken[strings.TrimSpace(e.Ev.Text)]++
		}
	}
	for _, e := range r.phone.envelopes() {
		if e.Role == protocol.RoleUser && e.Ev.T == protocol.KindText {
			echoed[strings.TrimSpace(e.Ev.Text)] = true
		}
	}
	r.phone.mu.Lock()
	sent := slices.Clone(r.phone.sent)
	r.phone.mu.Unlock()
	for _, c := range sent {
		ok := r.phone.within("command "+c.cmd.Kind+" final", 30*time.Second, func() bool { s, _ := r.phone.final(c.cmd.ID); return s != "" })
		r.phone.mu.Lock()
		st, msg := r.phone.final(c.cmd.ID)
		var all []string
		for _, f := range r.phone.statuses[c.cmd.ID] {
			all = append(all, f.Status)
		}
		r.phone.mu.Unlock()
		if !ok {
			r.t.Errorf("%s %q: no final status (%v)", c.cmd.Kind, c.cmd.Text, all)
			continue
		}
		if c.cmd.Kind != protocol.CommandPrompt {
			if st != protocol.StatusDone {
				r.t.Errorf("%s: %s %s", c.cmd.Kind, st, msg)
			}
			continue
		}
		n := taken[strings.TrimSpace(c.cmd.Text)]
		switch {
		case n > 1:
			r.t.Errorf("prompt %q: Claude took it %d times", c.cmd.Text, n)
		case n == 1 && st != protocol.StatusDone:
			r.t.Errorf("prompt %q: Claude took it, the phone was told %s (%s)", c.cmd.Text, st, msg)
		case n == 0 && st == protocol.StatusDone && !echoed[strings.TrimSpace(c.cmd.Text)]:
			// Claude may take a prompt (echo it) and die before it
			// writes it: done, and shown, is true then.
			r.t.Errorf("prompt %q: the phone was told done, Claude never took it", c.cmd.Text)
		}
		r.t.Logf("%s %q: %v %s (in the transcript %d times)", c.cmd.Kind, c.cmd.Text, all, msg, n)
	}
}

// transcriptHas reports whether the session's transcript holds s.
func (r *rig) transcriptHas(s string) bool {
	b, _ := os.ReadFile(filepath.Join(r.env.ProjectDir(r.t), r.session+".jsonl"))
	return bytes.Contains(b, []byte(s))
}
