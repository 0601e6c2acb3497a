package protocol

import (
	"fmt"
	"unicode/utf8"
)

// Limits on what a relay stores or lists. docs/protocol.md ("Limits:
// fields and sizes") says each of them; a frame that breaks one is refused
// with an error frame that names the field and the limit.
const (
	// MaxEnvelopeBytes bounds one envelope's JSON. The mapper caps tool
	// results (MaxResultBytes), tool arguments (mapper.MaxArgsBytes) and
	// texts (mapper.MaxTextBytes) well below it; half the relay's frame
	// limit leaves room for the rest of a batch.
	MaxEnvelopeBytes = 4 << 20
	// MaxInfoBytes bounds an announced session description (its JSON).
	MaxInfoBytes = 1 << 20
	// MaxInfoStringBytes bounds each string value at the top of an
	// announced info (cwd, title, machine, status, error, …).
	MaxInfoStringBytes = 16 << 10
	// MaxInfoPermissions bounds the permission requests an info lists.
	MaxInfoPermissions = 64
	// MaxLiveBytes bounds a live frame's payload (a token delta).
	MaxLiveBytes = 64 << 10
	// MaxCommandBytes bounds a command's JSON (a prompt's text included).
	MaxCommandBytes = 256 << 10
	// MaxResultMessageBytes bounds the message of a command result (a
	// reason the CLI gives; Claude's last stderr lines fit).
	MaxResultMessageBytes = 16 << 10
	// MaxBlobBytes bounds the content the relay keeps beside one envelope
	// (Envelope.Blob): an image of a prompt; a larger image is listed
	// without its bytes.
	MaxBlobBytes = 4 << 20
	// MaxFullResultBytes bounds the full text of a tool result kept beside
	// its tool-call-end (the blob behind "show all"): a longer result is
	// kept to its first MaxFullResultBytes, cut on a UTF-8 boundary.
	MaxFullResultBytes = 1 << 20
	// MaxSealedResultChars bounds a command result's sealed message
	// (Frame.SealedMessage): a message of MaxResultMessageBytes, sealed,
	// in base64url.
	MaxSealedResultChars = ((MaxResultMessageBytes+SealOverheadMax)*8 + 5) / 6
	// MaxSealedCommandChars bounds a sealed command's text: a command of
	// MaxCommandBytes, sealed, in base64url.
	MaxSealedCommandChars = ((MaxCommandBytes+SealOverheadMax)*8 + 5) / 6
	// MaxFieldBytes bounds the short fields of a command: a permission
	// request id, a mode, a model name.
	MaxFieldBytes = 256
	// MaxDirBytes bounds the folder of a start command.
	MaxDirBytes = 4096
)

// IsSessionID reports whether s is a session id in the form Claude Code
// uses (and claude.NewSessionID makes): a UUID in its canonical text form,
// lowercase hex digits in groups of 8-4-4-4-12.
func IsSessionID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// CheckUTF8 returns an error that says where data stops being valid UTF-8,
// or nil.
func CheckUTF8(data []byte) error {
	if utf8.Valid(data) {
		return nil
	}
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return fmt.Errorf("invalid UTF-8 at byte %d", i)
		}
		i += n
	}
	return nil
}

// Validate checks a command as an app sends it: a cuid2 id, a known kind,
// short fields within MaxFieldBytes and a prompt's text within
// MaxCommandBytes. The size of the whole command is the relay's to check.
func (c *Command) Validate() error {
	if !IsCuid(c.ID) {
		return fmt.Errorf("command id %q is not a cuid2", c.ID)
	}
	if !ValidCommandKind(c.Kind) {
		return fmt.Errorf("unknown command kind %q", c.Kind)
	}
	if c.Sealed != "" {
		if c.Text != "" || c.RequestID != "" || c.Reason != "" || len(c.Input) > 0 || c.Mode != "" || c.Model != "" || c.Subagent != "" || c.Allow || c.ForSession ||
			c.Dir != "" || c.Target != "" || c.Resume || c.Agent != "" {
			return fmt.Errorf("a sealed command carries nothing readable but its id and kind")
		}
		if len(c.Sealed) > MaxSealedCommandChars || !isBase64URL(c.Sealed) {
			return fmt.Errorf("a sealed command is base64url of at most %d characters", MaxSealedCommandChars)
		}
		return nil
	}
	for name, v := range map[string]string{"requestId": c.RequestID, "mode": c.Mode, "model": c.Model} {
		if len(v) > MaxFieldBytes {
			return fmt.Errorf("command %s is %d bytes, more than %d", name, len(v), MaxFieldBytes)
		}
	}
	if len(c.Text) > MaxCommandBytes || len(c.Reason) > MaxCommandBytes {
		return fmt.Errorf("command text is more than %d bytes", MaxCommandBytes)
	}
	if len(c.Input) > 0 && !isJSONObject(c.Input) {
		return fmt.Errorf("command input must be a JSON object")
	}
	if c.Kind == CommandStopTask && !IsCuid(c.Subagent) {
		return fmt.Errorf("stop-task names no subagent (a cuid2), got %q", clipField(c.Subagent))
	}
	switch c.Kind {
	case CommandStart, CommandStop:
		if !IsSessionID(c.Target) {
			return fmt.Errorf("%s names no session (a UUID), got %q", c.Kind, clipField(c.Target))
		}
	}
	if c.Agent != "" && (c.Kind != CommandStart || !KnownAgent(c.Agent)) {
		return fmt.Errorf("agent %q: a start names claude or codex, and only a start names one", clipField(c.Agent))
	}
	if c.Kind == CommandStart && (c.Dir == "" || len(c.Dir) > MaxDirBytes || CheckUTF8([]byte(c.Dir)) != nil) {
		return fmt.Errorf("start needs a folder of at most %d bytes", MaxDirBytes)
	}
	return nil
}

// clipField keeps an error message short when a field is long.
func clipField(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// isBase64URL reports whether s is unpadded base64url text.
func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		if !base64URL[s[i]] {
			return false
		}
	}
	return true
}

// IsBase64URLByte reports whether c is a character of base64url text.
func IsBase64URLByte(c byte) bool { return base64URL[c] }

// base64URL says which bytes are base64url characters: a table is about
// three times as fast as comparing ranges, and a relay checks every
// character of each sealed envelope it is sent.
var base64URL = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
		t[c] = true
	}
	return t
}()
