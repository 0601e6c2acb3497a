package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ccrelay/ccrelay/internal/jsonscan"
)

// SealedEnvelope is what a relay sees of an envelope sealed end to end
// (docs/security.md, "Sealed envelopes and blobs"): the fields it routes
// by, and Sealed, the whole envelope's JSON sealed under the session's key.
type SealedEnvelope struct {
	ID       string      `json:"id"`
	Time     int64       `json:"time"`
	Role     Role        `json:"role"`
	Turn     string      `json:"turn,omitempty"`
	Subagent string      `json:"subagent,omitempty"`
	Ev       SealedEvent `json:"ev"`
	Sealed   string      `json:"sealed"`
}

// SealedEvent is the readable part of a sealed envelope's event: its kind,
// and a turn-end's status.
type SealedEvent struct {
	T      Kind       `json:"t"`
	Status TurnStatus `json:"status,omitempty"`
}

// MaxSealedChars bounds a sealed envelope's text: MaxEnvelopeBytes sealed
// (at most 31 bytes of version, epoch, nonce and tag) in unpadded base64url.
const MaxSealedChars = ((MaxEnvelopeBytes+SealOverheadMax)*8 + 5) / 6

// SealOverhead is the least sealing adds to a value (version, nonce, tag).
const SealOverhead = 29

// SealOverheadMax is the most sealing adds to a value: under a session
// key's later epoch (after a rotation), two bytes of epoch more.
const SealOverheadMax = 31

// IsSealed reports whether raw, an envelope's JSON, is a sealed envelope:
// it has a "sealed" key (the key cannot appear inside a JSON string, where
// its quotes would be escaped).
func IsSealed(raw []byte) bool { return bytes.Contains(raw, []byte(`"sealed":`)) }

// SealedHeader is the readable part of e, to go with its sealed JSON.
func SealedHeader(e *Envelope, sealed string) SealedEnvelope {
	h := SealedEnvelope{ID: e.ID, Time: e.Time, Role: e.Role, Turn: e.Turn, Subagent: e.Subagent,
		Ev: SealedEvent{T: e.Ev.T}, Sealed: sealed}
	if e.Ev.T == KindTurnEnd {
		h.Ev.Status = e.Ev.Status
	}
	return h
}

// Validate checks the readable fields by the envelope's rules and that
// Sealed is unpadded base64url text of a possible size.
func (s *SealedEnvelope) Validate() error {
	switch {
	case !IsCuid(s.ID):
		return invalid("id %q is not a cuid2", s.ID)
	case s.Time < 0:
		return invalid("negative time %d", s.Time)
	case s.Role != RoleUser && s.Role != RoleAgent:
		return invalid("role %q is not user or agent", s.Role)
	case s.Turn != "" && !IsCuid(s.Turn):
		return invalid("turn %q is not a cuid2", s.Turn)
	case s.Subagent != "" && !IsCuid(s.Subagent):
		return invalid("subagent %q is not a cuid2", s.Subagent)
	case !knownKind(s.Ev.T):
		return invalid("unknown event kind %q", s.Ev.T)
	case s.Ev.T == KindTurnEnd && !s.Ev.Status.Valid():
		return invalid("turn-end status %q", s.Ev.Status)
	case s.Ev.T != KindTurnEnd && s.Ev.Status != "":
		return invalid("a status on %s", s.Ev.T)
	case len(s.Sealed) < (SealOverhead*8+5)/6 || len(s.Sealed) > MaxSealedChars:
		return invalid("sealed value of %d characters", len(s.Sealed))
	}
	if !isBase64URL(s.Sealed) {
		return invalid("sealed value is not base64url")
	}
	return nil
}

// sealedKeys are the members of a sealed envelope.
var sealedKeys = []string{"id", "time", "role", "turn", "subagent", "ev", "sealed"}

// DecodeSealed reads a sealed envelope strictly: only its fields.
func DecodeSealed(raw []byte) (SealedEnvelope, error) {
	var s SealedEnvelope
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return s, fmt.Errorf("%w: sealed envelope: %v", ErrInvalid, err)
	}
	if err := exactKeys(raw, sealedKeys); err != nil {
		return s, fmt.Errorf("sealed envelope: %w", err)
	}
	var ev json.RawMessage
	_ = jsonscan.EachMember(raw, func(k, v []byte) error {
		if string(k) == "ev" {
			ev = v
		}
		return nil
	})
	if err := exactKeys(ev, []string{"t", "status"}); err != nil {
		return s, fmt.Errorf("sealed envelope: ev: %w", err)
	}
	return s, s.Validate()
}

func knownKind(k Kind) bool {
	for _, x := range Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// DeviceInfo is a device the relay lists to a CLI (FrameDevices): a device
// credential of the CLI's account that has a public key.
type DeviceInfo struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// WrappedKey is a session key wrapped for one device (FrameKeys).
type WrappedKey struct {
	Device  string `json:"device"`
	Wrapped string `json:"wrapped"`
}

// Chain is what a sealed envelope's body carries beyond the envelope
// (docs/security.md, "Withheld envelopes"): its running count among the
// session's sealed envelopes (from 1) and the id of the one sealed before
// it ("" for the first), so that a device sees one the relay dropped,
// reordered or replayed.
type Chain struct {
	N    int64  `json:"n"`
	Prev string `json:"prev"`
}

// chainKey starts the chain member appended to a sealed envelope's JSON.
const chainKey = `,"chain":`

// AppendChain appends the chain member to env, an envelope's JSON object:
// {…,"chain":{"n":n,"prev":prev}}.
func AppendChain(env []byte, n int64, prev string) []byte {
	if len(env) < 2 || env[len(env)-1] != '}' {
		return env
	}
	c, _ := json.Marshal(Chain{N: n, Prev: prev})
	out := make([]byte, 0, len(env)+len(chainKey)+len(c))
	out = append(out, env[:len(env)-1]...)
	if len(env) == 2 { // {}
		out = append(out, chainKey[1:]...)
	} else {
		out = append(out, chainKey...)
	}
	out = append(out, c...)
	return append(out, '}')
}

// ChainEnd is where a session's sealed chain stood when the machine
// announced it, carried in the session's sealed summary (member
// "chainEnd"): the count of envelopes sealed before the announcement and
// the last one's id. A device that has every envelope of the session
// reaches that count; fewer means the relay withheld the last ones, which
// no later envelope names.
type ChainEnd struct {
	N    int64  `json:"n"`
	Last string `json:"last"`
}

// AppendChainEnd adds the member "chainEnd" to sum, a summary's JSON
// object.
func AppendChainEnd(sum []byte, n int64, last string) []byte {
	if len(sum) < 2 || sum[len(sum)-1] != '}' {
		return sum
	}
	c, _ := json.Marshal(ChainEnd{N: n, Last: last})
	out := make([]byte, 0, len(sum)+len(c)+12)
	out = append(out, sum[:len(sum)-1]...)
	if len(sum) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"chainEnd":`...)
	out = append(out, c...)
	return append(out, '}')
}

// SplitChain takes the chain member off what a sealed envelope opens to:
// the envelope's JSON as the machine made it, and the chain (ok false for
// an envelope sealed before chains, which is returned as it is).
func SplitChain(plain []byte) (env []byte, c Chain, ok bool) {
	i := bytes.LastIndex(plain, []byte(chainKey))
	if i < 0 || len(plain) == 0 || plain[len(plain)-1] != '}' {
		return plain, Chain{}, false
	}
	if err := json.Unmarshal(plain[i+len(chainKey):len(plain)-1], &c); err != nil {
		return plain, Chain{}, false
	}
	return append(plain[:i:i], '}'), c, true
}
