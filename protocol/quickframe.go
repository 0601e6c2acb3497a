package protocol

import "encoding/json"

// QuickFrame decodes data, a frame's JSON, in one pass when it is a frame
// of the keys v, type, ref, session and envelopes alone (what a CLI sends
// with each batch), each once, v a plain integer, the strings without
// escapes and envelopes an array of objects: the Frame json.Unmarshal
// would give (its envelopes are data's own bytes, not copies). It returns
// false for any other frame, which the caller decodes with json.Unmarshal.
func QuickFrame(data []byte) (Frame, bool) {
	f, _, ok := quickFrame(data, false)
	return f, ok
}

// QuickBatch is QuickFrame that also decides, in the same pass, what
// QuickCheck would of each of the frame's envelopes: ids[i] is envelope
// i's id where QuickCheck accepts it, "" where it leaves it to the full
// decoding (ids is nil when the frame has no envelopes).
func QuickBatch(data []byte) (f Frame, ids []string, ok bool) {
	return quickFrame(data, true)
}

func quickFrame(data []byte, check bool) (Frame, []string, bool) {
	q := quick{b: data}
	var f Frame
	var ids []string
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
			if check {
				return q.rawObjects(&f.Envelopes, &ids)
			}
			return q.rawObjects(&f.Envelopes, nil)
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
		return Frame{}, nil, false
	}
	q.ws()
	if q.i != len(q.b) {
		return Frame{}, nil, false
	}
	return f, ids, true
}

// rawObjects scans an array of objects into out, each as its bytes; with
// ids, each is scanned as an envelope first, and its id is kept where
// QuickCheck would accept it. An envelope's scan reads nothing after its
// closing brace, and an object it takes is valid JSON, which skipValue
// would end at the same byte: the objects are the same either way.
func (q *quick) rawObjects(out *[]json.RawMessage, ids *[]string) bool {
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
		id := ""
		if ids != nil {
			var env quickEnvelope
			if q.envelope(&env) && env.valid() {
				id = string(env.id)
			} else {
				q.i = start
			}
		}
		if id == "" && !q.skipValue(0) {
			return false
		}
		list = append(list, json.RawMessage(q.b[start:q.i:q.i]))
		if ids != nil {
			*ids = append(*ids, id)
		}
		if q.byte(']') {
			*out = list
			return true
		}
		if !q.byte(',') {
			return false
		}
	}
}
