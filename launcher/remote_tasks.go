package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// TaskProgress is a running subagent's progress.
type TaskProgress struct {
	Subagent    string `json:"subagent"` // its envelopes' subagent id
	Description string `json:"description,omitempty"`
	LastTool    string `json:"lastTool,omitempty"` // the tool it used last
	Tokens      int64  `json:"tokens,omitempty"`
	ToolUses    int64  `json:"toolUses,omitempty"`
}

// MaxTrackedProgress bounds the subagents whose progress the state shows.
const MaxTrackedProgress = 16

// progress updates the state from task_progress, and drops a task that
// ended. Called with mu held.
func (r *Remote) progress(subtype string, sys *claude.System) {
	sub := ""
	if sys.ToolUseID != "" {
		sub = protocol.SubagentID(sys.ToolUseID)
	}
	idx := -1
	for i, t := range r.state.Tasks {
		if t.Subagent == sub || (sub == "" && r.taskIDs[t.Subagent] == sys.TaskID) {
			idx = i
		}
	}
	switch {
	case subtype == claude.SystemTaskProgress && sub != "":
		var u struct {
			Tokens   int64 `json:"total_tokens"`
			ToolUses int64 `json:"tool_uses"`
		}
		json.Unmarshal(sys.TaskUsage, &u)
		t := TaskProgress{Subagent: sub, Description: clip(sys.Description, 200), LastTool: clip(sys.LastToolName, 64), Tokens: u.Tokens, ToolUses: u.ToolUses}
		r.taskIDs[sub] = sys.TaskID
		switch {
		case idx >= 0:
			r.state.Tasks[idx] = t
		case len(r.state.Tasks) < MaxTrackedProgress:
			r.state.Tasks = append(r.state.Tasks, t)
		default:
			return
		}
	case subtype == claude.SystemTaskNotification || subtype == claude.SystemTaskUpdated && claude.TaskTerminal(sys.Patch.Status):
		if idx < 0 {
			return
		}
		delete(r.taskIDs, r.state.Tasks[idx].Subagent)
		r.state.Tasks = slices.Delete(r.state.Tasks, idx, idx+1)
	default:
		return
	}
	r.publish()
}

// MaxTrackedTasks bounds the background subagents a Remote keeps for
// stop-task; past it, new ones cannot be stopped one by one (Interrupt
// still stops the turn).
const MaxTrackedTasks = 256

// trackTask follows which background subagents run. Called with mu held.
func (r *Remote) trackTask(subtype string, sys *claude.System) {
	switch subtype {
	case claude.SystemTaskStarted:
		if sys.IsBackgrounded && sys.TaskID != "" && sys.ToolUseID != "" && len(r.tasks) < MaxTrackedTasks {
			r.tasks[protocol.SubagentID(sys.ToolUseID)] = sys.TaskID
			r.taskCalls[protocol.SubagentID(sys.ToolUseID)] = sys.ToolUseID
		}
	case claude.SystemTaskNotification:
		delete(r.tasks, protocol.SubagentID(sys.ToolUseID))
		delete(r.taskCalls, protocol.SubagentID(sys.ToolUseID))
	case claude.SystemTaskUpdated:
		if claude.TaskTerminal(sys.Patch.Status) {
			for sub, id := range r.tasks {
				if id == sys.TaskID {
					delete(r.tasks, sub) // its call stays until its notification
				}
			}
		}
	}
}

// beforeMessage sends the held end of a stopped background task before a
// message that is not its interruption line (Claude's order, D22 aside: a
// stopped subagent's "[Request interrupted by user]" comes after its
// notification on stdout, before it in the transcript). Called with mu held.
func (r *Remote) beforeMessage(m *claude.StreamMessage) {
	if len(r.stash) == 0 {
		return
	}
	switch {
	case m.Record != nil && r.stash[m.Record.ParentToolUseID] != nil:
		return // the stopped subagent's own line: afterMessage sends its end
	case m.Record != nil, m.Type == claude.StreamSystem && m.Subtype == claude.SystemInit:
		r.flushStash() // the conversation goes on: the end goes first
	}
	// Anything else (live deltas, control answers, background_tasks_changed
	// and other notes) passes without sending it; so does the result of
	// the turn that launched the subagent, which Claude may print between
	// the notification and the interruption line.
}

// afterMessage sends a stopped subagent's held end after its last line,
// its interruption line: the lines before it (the result of the tool the
// stop cut, say) belong to the subagent too, and a line of a stopped
// subagent would start it again. Called with mu held.
func (r *Remote) afterMessage(m *claude.StreamMessage) {
	if m.Record == nil || m.Record.ParentToolUseID == "" || !interruptionLine(m.Record) {
		return
	}
	if recs := r.stash[m.Record.ParentToolUseID]; recs != nil {
		delete(r.stash, m.Record.ParentToolUseID)
		r.q.Push(item{recs: recs})
	}
}

// interruptionLine reports whether rec is Claude's "[Request interrupted by
// user…]" line, the last a stopped subagent prints.
func interruptionLine(rec *claude.Record) bool {
	if rec.Type != claude.TypeUser || rec.Message == nil {
		return false
	}
	c := rec.Message.Content
	if c.IsString {
		return claude.IsInterruptText(c.String)
	}
	for _, b := range c.Blocks {
		if b.Type == "text" && b.Text != nil && claude.IsInterruptText(*b.Text) {
			return true
		}
	}
	return false
}

// flushStash sends every held end. Called with mu held.
func (r *Remote) flushStash() {
	for id, recs := range r.stash {
		delete(r.stash, id)
		r.q.Push(item{recs: recs})
	}
}

// ErrNoTask is the answer to stop-task for a subagent that is not a
// running background task.
var ErrNoTask = errors.New("no such background subagent is running")

// StopTask stops one background subagent (Claude's stop_task control
// request), leaving the turn and the other subagents running.
func (r *Remote) StopTask(ctx context.Context, subagent string) error {
	r.mu.Lock()
	p, id := r.proc, r.tasks[subagent]
	if p != nil && id != "" && len(r.stopping) < MaxTrackedTasks {
		r.stopping[r.taskCalls[subagent]] = true
	}
	r.mu.Unlock()
	if p == nil || id == "" {
		return ErrNoTask
	}
	ctx, cancel := context.WithTimeout(ctx, ControlTimeout)
	defer cancel()
	_, err := r.control(ctx, p, claude.ControlStopTask, map[string]string{"task_id": id})
	return err
}
