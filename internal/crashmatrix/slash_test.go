//go:build linux

package crashmatrix

import (
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

const (
	thirdPrompt = "third prompt, after Claude restarted"
	thirdAnswer = "answer to the third prompt"
)

// slashCommands are the commands TestSlashFromPhone sends.
var slashCommands = []string{"/clear", "/compact"}

// /clear and /compact sent from the phone to a remote session: the
// command is shown as what it is, every status is final and true, the
// next prompt is answered, and after Claude dies the next one is too, in
// the conversation Claude had (after /clear: not the one before it).
func TestSlashFromPhone(t *testing.T) {
	for _, slash := range slashCommands {
		t.Run(strings.TrimPrefix(slash, "/"), func(t *testing.T) {
			t.Parallel()
			r := newRig(t, claudetest.Find(t), false)
			r.setRules(append(answerFirst(r), fakeapi.Rule{LastUserContains: thirdPrompt, Reply: []fakeapi.Block{fakeapi.Text(thirdAnswer)}})...)
			r.answeredWith(r.startSession(firstPrompt), firstAnswer)
			if st, msg := r.phone.answered(r.prompt(slash)); st != protocol.StatusDone {
				t.Errorf("%s: %s %s", slash, st, msg)
			}
			old := r.view()
			if slash == "/clear" {
				// Claude goes on in a session of its own: the phone
				// follows it there.
				var next string
				r.phone.until("the session after /clear listed", func() bool {
					for id := range r.phone.sessions {
						if id != r.session && r.phone.info(id)["mode"] == "remote" {
							next = id
							return true
						}
					}
					return false
				})
				r.session = next
				r.phone = dialPhone(t, r.base, r.token, next)
				r.phone.more = r.output
			}
			r.nextAnswered()
			r.killClaude()
			// The next prompt once ccrelay said Claude stopped (a prompt
			// sent while Claude dies is a case of the matrix).
			r.phone.until("Claude's end listed", func() bool {
				e, _ := r.phone.info(r.session)["error"].(string)
				return e != ""
			})
			r.answeredWith(r.prompt(thirdPrompt), thirdAnswer)
			for _, q := range r.env.API.Requests() {
				if slash == "/clear" && (strings.Contains(q.LastUser, nextPrompt) || strings.Contains(q.LastUser, thirdPrompt)) &&
					strings.Contains(q.UserContent, firstPrompt) {
					t.Errorf("after /clear Claude was asked %q in the conversation before the clear", strings.TrimSpace(q.LastUser))
				}
			}
			shown := false
			for _, e := range append(old.phone.envelopes(), r.phone.envelopes()...) {
				if e.Role == protocol.RoleUser && e.Ev.T == protocol.KindText && e.Ev.Command != nil && e.Ev.Command.Name == slash {
					shown = true
				}
			}
			if !shown {
				t.Errorf("the phone was not shown %s", slash)
			}
			r.check()
			if slash == "/clear" {
				t.Log("the session before /clear:")
				old.check()
			}
		})
	}
}
