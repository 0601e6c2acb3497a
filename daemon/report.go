package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"runtime"

	"github.com/ccrelay/ccrelay/protocol"
)

// A Codex session the daemon starts runs under the id Codex gives its
// thread, which the start's target cannot name (Codex chooses it). The
// session reports it on a pipe of its own (descriptor 3, named by
// --daemon-report-fd), one JSON line {"thread": id}: the daemon then knows
// the session by both ids, announces both as running, and joins a start
// of the thread (the app's Resume of it) to the session that runs it
// instead of starting a second Codex on the same thread.

// reportPipes: whether sessions get a report pipe. Windows passes no
// descriptors beyond the standard three to a child (exec.Cmd.ExtraFiles):
// there the daemon knows a new Codex thread by its start's target only.
var reportPipes = runtime.GOOS != "windows"

// Bounds of what a session reports.
const (
	maxReportLine  = 4096
	maxReportLines = 16
)

// threadReport is a session's report of its thread.
type threadReport struct {
	c      *child
	thread string
}

// readReports reads what the session of c reports on r until the session
// closes it or exits, and hands it to Run's loop; past maxReportLines,
// lines are read and dropped.
func (d *daemon) readReports(c *child, r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, maxReportLine)
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			d.log.Warn("a session reported a line too long; ignored", "session", c.session)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				d.log.Warn("reading a session's reports ended", "session", c.session, "err", err)
			}
			return
		}
		if n >= maxReportLines {
			continue
		}
		var m struct {
			Thread string `json:"thread"`
		}
		if json.Unmarshal(line, &m) != nil || m.Thread == "" {
			d.log.Warn("a session reported something else than its thread; ignored", "session", c.session)
			continue
		}
		select {
		case d.threads <- threadReport{c, m.Thread}:
		case <-d.quit:
			_, _ = io.Copy(io.Discard, br)
			return
		}
	}
}

// learnThread takes a session's report of its thread, checked against
// what the daemon started: a session id; for a resume, the thread the
// start named; no thread another session of the daemon runs.
func (d *daemon) learnThread(t threadReport) {
	c := t.c
	switch {
	case d.children[c.session] != c:
		return // ended meanwhile
	case !protocol.IsSessionID(t.thread):
		d.log.Warn("a session reported a thread that is no session id; ignored", "session", c.session)
		return
	case t.thread == c.session || t.thread == c.thread:
		return
	case c.thread != "":
		d.log.Warn("a session reported a second thread; ignored", "session", c.session, "thread", c.thread, "reported", t.thread)
		return
	case c.start.Resume:
		d.log.Warn("a resumed session reported another thread than the one it resumes; ignored", "session", c.session, "reported", t.thread)
		return
	}
	if o := d.running(t.thread); o != nil {
		d.log.Warn("a session reported a thread another session runs; ignored", "session", c.session, "thread", t.thread, "runs it", o.session)
		return
	}
	c.thread = t.thread
	d.log.Info("a session runs as the thread Codex gave it", "session", c.session, "thread", t.thread)
	d.announce()
}

// running is the session the daemon runs as id: the target of its start,
// or the thread it reported (nil: none).
func (d *daemon) running(id string) *child {
	if c, ok := d.children[id]; ok {
		return c
	}
	for _, c := range d.children {
		if c.thread != "" && c.thread == id {
			return c
		}
	}
	return nil
}

// joins reports whether start c, for the session ch runs (dir: c's folder,
// resolved), asks for what ch does already: the same start again (a
// retry under another command id, a second tap), or a resume of the
// session ch runs, by the same agent in the same folder, with no prompt
// that would be lost.
func joins(ch *child, c protocol.Command, dir string) bool {
	s := ch.start
	agent := func(a string) string {
		if a == "" {
			return protocol.AgentClaude
		}
		return a
	}
	if agent(s.Agent) != agent(c.Agent) || ch.dir != dir {
		return false
	}
	if c.Resume && c.Text == "" && c.Model == "" && c.Mode == "" {
		return true
	}
	return s.Target == c.Target && s.Resume == c.Resume && s.Text == c.Text && s.Model == c.Model && s.Mode == c.Mode
}
