package apiclient

// A command's result for a sealed session (docs/security.md, "Sealed
// announcements, live deltas and commands"): its message can carry what
// the session holds (an agent's stderr, a folder, what the command asked),
// so it reaches the relay sealed, and only the status and ids stay
// readable.

import (
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

// SealResult seals a command result's message for (session,
// protocol.ResultSealID(id), from the machine) under the session's current
// key. It never makes a key: a session this machine has no key of (a
// command the relay made up) gets an error.
func (k *Keyring) SealResult(session, id, message string) (string, error) {
	if _, err := k.existingKey(session); err != nil {
		return "", err
	}
	key, epoch, err := k.Current(session)
	if err != nil {
		return "", err
	}
	return key.SealEpoch(epoch, seal.AD{Session: session, ID: protocol.ResultSealID(id), Direction: seal.FromMachine}, []byte(message))
}

// resultFrame is the command-result frame for a command's outcome. For a
// sealed session the message goes sealed (SealedMessage), the readable one
// being protocol.SealedResultMessage; one that cannot be sealed is not
// sent at all (only the status is).
func (c *Client) resultFrame(session, id, status, message string) protocol.Frame {
	f := protocol.Frame{Type: protocol.FrameResult, Session: session, Command: &protocol.Command{ID: id}, Status: status, Message: message}
	kr := c.cfg.Keyring
	if message == "" || kr == nil || !kr.Sealing(session) {
		return f
	}
	if len(message) > protocol.MaxResultMessageBytes {
		message = clipUTF8(message, protocol.MaxResultMessageBytes)
	}
	f.Message = protocol.SealedResultMessage
	sealed, err := kr.SealResult(session, id, message)
	if err != nil {
		// Never the plaintext of a sealed session.
		c.log.Debug("a command's result goes without its message: it could not be sealed", "session", session, "id", id, "err", err)
		return f
	}
	f.SealedMessage = sealed
	return f
}

// clipUTF8 cuts s to at most n bytes, on a character's boundary.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
