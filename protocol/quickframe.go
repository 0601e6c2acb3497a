package protocol

import "encoding/json"

// QuickFrame decodes data, a frame's JSON, in one pass when it is a frame
// of the keys v, type, ref, session and envelopes alone (what a CLI sends
// with each batch), each once, v a plain integer, the strings without
// escapes and envelopes an array of objects: the Frame json.Unmarshal
// would give (its envelopes are data's own bytes, not copies). It returns
// false for any other frame, which the caller decodes with json.Unmarshal.
func QuickFrame(data []byte) (Frame, bool) {
	q := quick{b: data}
	var f Frame
	var seen uint8
	ok := q.object(func(k []byte) bool {
		bit := uint8(0)
		switch string(k) {
		case "v":
			bit = 1
		case "type":
			bit = 2
		case "ref":
			bit = 4
		case "session":
			bit = 8
		case "envelopes":
			bit = 16
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		var s quickString
		switch bit {
		case 1:
			v, ok := q.plainInt()
			f.V = int(v)
			return ok
		case 16:
			return q.rawObjects(&f.Envelopes)
		}
		if !q.string(&s) || s.escaped {
			return false
		}
		switch bit {
		case 2:
			f.Type = string(s.raw)
		case 4:
			f.Ref = string(s.raw)
		case 8:
			f.Session = string(s.raw)
		}
		return true
	})
	if !ok {
		return Frame{}, false
	}
	q.ws()
	if q.i != len(q.b) {
		return Frame{}, false
	}
	return f, true
}

// rawObjects scans an array of objects into out, each as its bytes.
func (q *quick) rawObjects(out *[]json.RawMessage) bool {
	if !q.byte('[') {
		return false
	}
	list := []json.RawMessage{} // [] decodes to an empty list, not nil
	if q.byte(']') {
		*out = list
		return true
	}
	for {
		if q.peek() != '{' {
			return false
		}
		start := q.i
		if !q.skipValue(0) {
			return false
		}
		list = append(list, json.RawMessage(q.b[start:q.i:q.i]))
		if q.byte(']') {
			*out = list
			return true
		}
		if !q.byte(',') {
			return false
		}
	}
}
