package launcher

import "github.com/ccrelay/ccrelay/claude"

// The model of each session, as its assistant records carry it: local mode
// and a follower announce no model of their own (Claude in the terminal
// tells none), and the app prices a session's usage by its model.

// noteModel remembers the model rec names for session, if any, and signals
// ModelChanged when it differs from the one before. Claude Code's own
// messages (claude.SyntheticModel) name none, and a subagent's records
// (sidechain) name the subagent's own model. Called with mu held.
func (p *Pipeline) noteModel(session string, rec *claude.Record) {
	if rec == nil || rec.Type != claude.TypeAssistant || rec.Message == nil || rec.IsSidechain || rec.AgentID != "" {
		return
	}
	m := rec.Message.Model
	if m == "" || m == claude.SyntheticModel || p.models[session] == m {
		return
	}
	if p.models == nil {
		p.models = map[string]string{}
	}
	p.models[session] = m
	select {
	case p.modelChanged <- struct{}{}:
	default: // a signal is pending already
	}
}

// Model is the model of session's latest assistant record ("": none yet).
func (p *Pipeline) Model(session string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fixed != "" {
		session = p.fixed
	}
	return p.models[session]
}

// ModelChanged receives a value after some session's model changed (see
// Model); one value may stand for several changes.
func (p *Pipeline) ModelChanged() <-chan struct{} {
	return p.modelChanged
}
