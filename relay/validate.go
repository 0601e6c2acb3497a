package relay

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/ccrelay/ccrelay/protocol"
)

// Every frame is checked before anything is claimed, stored or forwarded:
// a refused frame leaves no trace (no empty session, no stored byte).

// refuseInvalidUTF8 answers a frame that is not valid UTF-8 anywhere
// (websocket text frames must be; a browser closes on one that is not).
// The code is the one the frame's type uses for a frame refused for what it
// is, so that a CLI drops it rather than send it again.
func refuseInvalidUTF8(f protocol.Frame, data []byte) *protocol.Frame {
	err := protocol.CheckUTF8(data)
	if err == nil {
		return nil
	}
	e := errorFrame(refusalCode(f.Type), "the frame is not valid UTF-8 (%v); nothing of it was stored or forwarded", err)
	e.Ref = f.Ref
	return &e
}

// refusalCode is the error code for a frame of type typ refused for what
// it is (a CLI drops such a frame rather than send it again).
func refusalCode(typ string) string {
	code := map[string]string{
		protocol.FrameEnvelopes: "bad-batch",
		protocol.FrameAnnounce:  "bad-announce",
		protocol.FrameLive:      "bad-live",
		protocol.FrameResult:    "bad-result",
		protocol.FrameCommand:   "bad-command",
		protocol.FrameSubscribe: "bad-subscribe",
	}[typ]
	if code == "" {
		code = "bad-frame"
	}
	return code
}

func checkSession(id string) error {
	if !protocol.IsSessionID(id) {
		return fmt.Errorf("session id %q is not a UUID (lowercase, 8-4-4-4-12 hex digits, as Claude Code makes them)", clip(id, 64))
	}
	return nil
}

// checkBatch validates a FrameEnvelopes and returns its items. ids, when
// it has an entry for each envelope, is what QuickCheck says of each (as
// protocol.QuickBatch gave it while the frame was read: its id, or ""
// where QuickCheck leaves it to the full decoding); nil, QuickCheck is
// asked here.
func checkBatch(f protocol.Frame, ids []string) ([]Item, *protocol.Frame) {
	if err := checkSession(f.Session); err != nil {
		e := errorFrame("bad-batch", "%v", err)
		return nil, &e
	}
	if len(f.Envelopes) == 0 || len(f.Envelopes) > maxBatch {
		e := errorFrame("bad-batch", "a batch needs 1 to %d envelopes, not %d", maxBatch, len(f.Envelopes))
		return nil, &e
	}
	items := make([]Item, len(f.Envelopes))
	// What the blobs are checked against, kept only for a batch with
	// blobs (an Envelope is some 400 bytes: a hundred of them were most
	// of what checking a batch allocated).
	var envs []protocol.Envelope
	var sealed []bool
	if len(f.Blobs) > 0 {
		envs = make([]protocol.Envelope, len(f.Envelopes))
		sealed = make([]bool, len(f.Envelopes))
	}
	for i, raw := range f.Envelopes {
		if len(raw) > protocol.MaxEnvelopeBytes {
			e := errorFrame("bad-envelope", "envelope %d is %d bytes, more than %d", i, len(raw), protocol.MaxEnvelopeBytes)
			return nil, &e
		}
		if protocol.IsSealed(raw) {
			// Sealed end to end: only the readable fields are checked.
			h, err := protocol.DecodeSealed(raw)
			if err != nil {
				e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
				return nil, &e
			}
			items[i] = Item{ID: h.ID, Body: raw}
			if envs != nil {
				envs[i] = protocol.Envelope{ID: h.ID, Ev: protocol.Event{T: h.Ev.T}}
				sealed[i] = true
			}
			continue
		}
		if len(f.Blobs) == 0 {
			// Most envelopes are decided valid in one pass over their
			// bytes; the rest (and any with a blob, whose fields the
			// blob is checked against) are decoded in full.
			var id string
			if len(ids) == len(f.Envelopes) {
				id = ids[i]
			} else {
				id, _ = protocol.QuickCheck(raw)
			}
			if id != "" {
				items[i] = Item{ID: id, Body: raw}
				continue
			}
		}
		var env protocol.Envelope
		if err := json.Unmarshal(raw, &env); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
			return nil, &e
		}
		if err := env.Validate(); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
			return nil, &e
		}
		items[i] = Item{ID: env.ID, Body: raw}
		if envs != nil {
			envs[i] = env
		}
	}
	if len(f.Blobs) > len(f.Envelopes) {
		e := errorFrame("bad-batch", "%d blobs for %d envelopes", len(f.Blobs), len(f.Envelopes))
		return nil, &e
	}
	for _, b := range f.Blobs {
		i := slices.IndexFunc(items, func(it Item) bool { return it.ID == b.ID })
		if i < 0 || items[i].Blob != nil {
			e := errorFrame("bad-batch", "blob %q is not for one envelope of the batch", clip(b.ID, 40))
			return nil, &e
		}
		check := checkBlob
		if sealed[i] {
			check = checkSealedBlob
		}
		if err := check(&envs[i], b.Data); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: blob: %v", i, err)
			return nil, &e
		}
		items[i].Blob = b.Data
	}
	return items, nil
}

// BlobImageTypes are the types of image a file envelope's blob may be: the
// app shows them as images (docs/protocol.md, "Blobs").
var BlobImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// checkSealedBlob checks what the relay can of a sealed envelope's blob:
// its kind may have one, and its size is within that kind's bound once
// sealed.
func checkSealedBlob(env *protocol.Envelope, data []byte) error {
	limit := 0
	switch env.Ev.T {
	case protocol.KindToolCallEnd:
		limit = protocol.MaxFullResultBytes
	case protocol.KindFile:
		limit = protocol.MaxBlobBytes
	default:
		return fmt.Errorf("a %s envelope has no blob", env.Ev.T)
	}
	if len(data) < protocol.SealOverhead || len(data) > limit+protocol.SealOverheadMax {
		return fmt.Errorf("a sealed blob of %d bytes (%d to %d)", len(data), protocol.SealOverhead, limit+protocol.SealOverheadMax)
	}
	return nil
}

// checkBlob checks that env declares the blob it comes with: a
// tool-call-end's full result (valid UTF-8, as long as its full says), or a
// file envelope's image (its ref is its own id, its size and type say
// what the blob is).
func checkBlob(env *protocol.Envelope, data []byte) error {
	switch ev := &env.Ev; ev.T {
	case protocol.KindToolCallEnd:
		if int64(len(data)) != ev.Full || ev.Full == 0 {
			return fmt.Errorf("%d bytes, but the envelope's full says %d", len(data), ev.Full)
		}
		return protocol.CheckUTF8(data)
	case protocol.KindFile:
		switch {
		case ev.Ref != env.ID:
			return fmt.Errorf("the file's ref is not its envelope's id")
		case ev.Size == nil || int64(len(data)) != *ev.Size:
			return fmt.Errorf("%d bytes, but the file's size says otherwise", len(data))
		case len(data) > protocol.MaxBlobBytes:
			return fmt.Errorf("%d bytes, more than %d", len(data), protocol.MaxBlobBytes)
		case !slices.Contains(BlobImageTypes, ev.MimeType):
			return fmt.Errorf("type %q is not an image type the relay keeps", clip(ev.MimeType, 40))
		}
		return nil
	}
	return fmt.Errorf("a %s envelope has no blob", env.Ev.T)
}

// checkInfo validates an announced session description: a JSON object of
// at most MaxInfoBytes, its top-level strings within MaxInfoStringBytes,
// at most MaxInfoPermissions permission requests.
func checkInfo(info json.RawMessage) error {
	if len(info) > protocol.MaxInfoBytes {
		return fmt.Errorf("info is %d bytes, more than %d", len(info), protocol.MaxInfoBytes)
	}
	var m map[string]json.RawMessage
	if len(info) == 0 || info[0] != '{' || json.Unmarshal(info, &m) != nil {
		return fmt.Errorf("info must be a JSON object")
	}
	for k, v := range m {
		// sealed has a bound of its own (checkSealedInfo): a sealed
		// summary of up to MaxSummaryBytes is longer than other strings.
		if k != "sealed" && len(v) > 0 && v[0] == '"' && len(v) > protocol.MaxInfoStringBytes+2 {
			return fmt.Errorf("info %q is %d bytes, more than %d", clip(k, 64), len(v)-2, protocol.MaxInfoStringBytes)
		}
	}
	if v, ok := m["sealed"]; ok {
		if err := checkSealedInfo(v); err != nil {
			return err
		}
	}
	if p, ok := m["permissions"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(p, &list) != nil {
			return fmt.Errorf("info permissions must be a list")
		}
		if len(list) > protocol.MaxInfoPermissions {
			return fmt.Errorf("info lists %d permission requests, more than %d", len(list), protocol.MaxInfoPermissions)
		}
	}
	return nil
}

// checkSealedInfo checks a sealed announcement's summary (info.sealed) as
// far as the relay can: a string of strict unpadded base64url (one text
// form per value: sealedBytes) of a sealed value's possible size. A value
// that fails would be dropped from the summary, which would leave the
// session listed without its title, folder or machine, and unmarked as
// sealed.
func checkSealedInfo(v json.RawMessage) error {
	var text string
	if json.Unmarshal(v, &text) != nil {
		return fmt.Errorf("info sealed must be a string (a sealed value in base64url)")
	}
	if min := (protocol.SealOverhead*8 + 5) / 6; len(text) < min || len(text) > protocol.MaxSealedInfoChars {
		return fmt.Errorf("info sealed is %d characters, not a sealed summary (%d to %d)", len(text), min, protocol.MaxSealedInfoChars)
	}
	if _, ok := sealedBytes([]byte(text)); !ok {
		return fmt.Errorf("info sealed is not strict unpadded base64url (another alphabet, padding, or unused trailing bits set): nothing of the announcement was kept")
	}
	return nil
}

// Lists carry a bounded summary of each session's info
// (protocol.SummarizeInfo).
const (
	summaryStringBytes = protocol.SummaryStringBytes
	summaryPermissions = protocol.SummaryPermissions
	summaryTurnCosts   = protocol.SummaryTurnCosts
	MaxSummaryBytes    = protocol.MaxSummaryBytes
)

// summaryInfo is the bounded part of info that lists carry.
func summaryInfo(info json.RawMessage) json.RawMessage { return protocol.SummarizeInfo(info) }

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string { return protocol.Clip(s, n) }
