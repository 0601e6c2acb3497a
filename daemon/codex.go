package daemon

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// startCodex starts a Codex session (ccrelay codex --remote) in dir, as
// asked: only where Codex is installed; a model checked as Claude's are;
// no permission mode (Claude Code's modes mean nothing to Codex); a thread
// to resume must have its rollout in Codex's home and not run already, a
// new session must not have one.
func (d *daemon) startCodex(c protocol.Command, dir string) error {
	if d.cfg.CodexVersion == "" || len(d.cfg.CodexCommand) == 0 {
		return errors.New("the Codex CLI is not installed on this machine (or ccrelay daemon cannot run it: see --codex)")
	}
	var codexArgs []string
	if c.Model != "" && c.Model != "default" {
		if err := launcher.CheckModel(c.Model); err != nil {
			return err
		}
		codexArgs = append(codexArgs, "--model", c.Model)
	}
	if c.Mode != "" && c.Mode != "default" {
		return fmt.Errorf("a Codex session takes no permission mode (%q is Claude Code's): Codex asks the app for approval", c.Mode)
	}
	_, err := codex.FindRollout(d.cfg.CodexHome, c.Target)
	exists := err == nil
	switch {
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("look for Codex thread %s: %w", c.Target, err)
	case c.Resume && !exists:
		return fmt.Errorf("Codex has no thread %s to resume", c.Target)
	case c.Resume && d.cfg.CodexBusy != nil && d.cfg.CodexBusy(c.Target):
		// Another ccrelay runs it: one the daemon did not start, or whose
		// new thread's id it was not told (no report pipe).
		return fmt.Errorf("session %s is already running", c.Target)
	case !c.Resume && exists:
		return fmt.Errorf("Codex thread %s exists already: resume it", c.Target)
	case !c.Resume && c.Text == "":
		return errors.New("a new session needs a first prompt")
	}
	args := append(slices.Clone(d.cfg.CodexCommand[1:]), "--remote", "--daemon-pipe", "--session", c.Target, "--started-by", d.cfg.Session)
	return d.spawn(c, dir, d.cfg.CodexCommand[0], args, codexArgs, true)
}
