package claude

import (
	"bytes"
	"hash/maphash"
)

// Claude Code writes a transcript's main chain in the order of its
// parentUuid links, nearly always: a record's parent is on a line before
// it. Not always: a Claude that answers fast enough (2.1.197 against a
// model that answers in ~40 ms) can write the assistant record and the
// turn's turn_duration before the user record of the prompt they answer.
// Mapped in file order, that shows the prompt after its turn. A Lineage
// remembers the lines of a main transcript read so far, so that a reader
// can tell a record whose parent is not read yet (Waits) and, once the
// parent is read, put it and the records between them in parent order
// (Hoist). Readers hold such a record at most MaxHeld records (and live,
// a short time) and then pass it on in file order.

// MaxHeld bounds the records of a main transcript held behind one whose
// parent is not read yet (itself included): with more read, it goes on in
// file order.
const MaxHeld = 64

// MaxHeldLines bounds all the lines, of any type, a reader holds behind a
// record whose parent is not read yet: lines that are not conversation
// (progress, attachments, snapshots) do not count toward MaxHeld, since
// Claude Code writes many between two conversation records, but are held
// with them; past this many the record goes on in file order, whatever
// MaxHeld says, so that a transcript cannot make a reader hold it whole.
const MaxHeldLines = 4096

// LineageWindow is how many lines a Lineage remembers (those read last);
// about 24 bytes each. A parent further back counts as not read: a record
// naming it is held as one whose parent may still come.
const LineageWindow = 1 << 14

// lineageFirst is how many lines a Lineage has room for at first: a
// short transcript grows it once or not at all.
const lineageFirst = 1 << 8

// Lineage remembers the uuid and parent of the last LineageWindow lines
// of one main transcript. The zero value is ready to use.
type Lineage struct {
	lines []lineEntry // a ring: line number n is lines[n%LineageWindow]
	n     uint64      // lines added
	// last finds a uuid's hash among the lines remembered: 1 + the number
	// of the last line with it. Without it a uuid not remembered (a record
	// whose parent is not read) cost a walk over every line remembered.
	last map[uint64]uint64
	// missing is the line the last incomplete Hoist found not read (its
	// uuid's hash); arrived is set when a line with that uuid is added.
	missing uint64
	arrived bool
}

type lineEntry struct {
	uuid, parent uint64 // hashes; 0: none
	conv         bool   // a conversation record (user, assistant, system, summary)
}

var lineageSeed = maphash.MakeSeed()

func hashUUID(s string) uint64 {
	if s == "" {
		return 0
	}
	h := maphash.String(lineageSeed, s)
	if h == 0 {
		h = 1
	}
	return h
}

// Add remembers a line of the transcript, in file order: its uuid (""
// for a line that has none) and its parent's, and whether it is a
// conversation record. It returns the line's number.
func (l *Lineage) Add(uuid, parent string, conv bool) uint64 {
	return l.add(lineEntry{uuid: hashUUID(uuid), parent: hashUUID(parent), conv: conv})
}

// AddRaw is Add of a line that is not conversation, its uuid and parent
// given as the JSON values in the line (ParseLineLink).
func (l *Lineage) AddRaw(uuid, parent []byte) uint64 {
	return l.add(lineEntry{uuid: hashRaw(uuid), parent: hashRaw(parent)})
}

// hashRaw is hashUUID of a JSON string value (0 for anything else).
func hashRaw(v []byte) uint64 {
	if len(v) < 3 || v[0] != '"' || v[len(v)-1] != '"' {
		return 0
	}
	c := v[1 : len(v)-1]
	if bytes.IndexByte(c, '\\') >= 0 {
		return hashUUID(jsonStr(v))
	}
	h := maphash.Bytes(lineageSeed, c)
	if h == 0 {
		h = 1
	}
	return h
}

func (l *Lineage) add(e lineEntry) uint64 {
	if l.missing != 0 && e.uuid == l.missing {
		l.arrived = true
	}
	n := l.n
	l.n++
	if len(l.lines) < LineageWindow {
		if l.lines == nil {
			l.lines = make([]lineEntry, 0, lineageFirst)
			l.last = make(map[uint64]uint64, lineageFirst)
		}
		l.lines = append(l.lines, e)
	} else {
		// The line forgotten leaves the index unless a later line has
		// its uuid.
		if old := l.lines[n%LineageWindow]; old.uuid != 0 && l.last[old.uuid] == n-LineageWindow+1 {
			delete(l.last, old.uuid)
		}
		l.lines[n%LineageWindow] = e
	}
	if e.uuid != 0 {
		l.last[e.uuid] = n + 1
	}
	return n
}

// find returns the number of the last line remembered whose uuid hashes
// to h.
func (l *Lineage) find(h uint64) (uint64, lineEntry, bool) {
	if h == 0 {
		return 0, lineEntry{}, false
	}
	v := l.last[h]
	if v == 0 {
		return 0, lineEntry{}, false
	}
	return v - 1, l.lines[(v-1)%LineageWindow], true
}

// Arrived reports whether the line that the last Hoist that was not
// complete found missing was added since: only then can Hoist of the same
// record be complete (or a line after it added was forgotten).
func (l *Lineage) Arrived() bool { return l.arrived }

// Waits reports whether r, about to be added, is a main-chain record
// that should wait for its parent: an assistant or system record whose
// parentUuid names no line read. A user record never waits: a prompt may
// name a record of another file (a resumed or forked session) or one far
// back (a conversation rewound), and a tool result comes after the call
// it answers. Sidechain records (subagents) and records without a parent
// (the start of a conversation, a compaction's boundary; its
// logicalParentUuid is not a parent) never wait.
func (l *Lineage) Waits(r *Record) bool {
	if r.IsSidechain || r.ParentUUID == "" || (r.Type != TypeAssistant && r.Type != TypeSystem) {
		return false
	}
	if n := len(l.lines); n > 0 && l.lines[(l.n-1)%LineageWindow].uuid == hashUUID(r.ParentUUID) {
		return false // the usual case: the line just before
	}
	_, _, ok := l.find(hashUUID(r.ParentUUID))
	return !ok
}

// Hoist puts s in parent order for its first record, line number held,
// which waited for its parent (Waits): the records of s[1:] its parent
// chain runs through, up to a line read before s[0] (or the chain's
// start), move in front of it, oldest first; the others keep their
// order. It reports whether the chain is complete: false, it names a line
// not read yet and nothing moved. rec gives the record of an element
// (conversation records only are moved; nil is not one).
func Hoist[T any](l *Lineage, s []T, held uint64, rec func(T) *Record) bool {
	if len(s) == 0 {
		return true
	}
	r := rec(s[0])
	if r == nil {
		return true
	}
	var from []int // indices in s of the records to move, newest first
	h := hashUUID(r.ParentUUID)
	l.missing = 0
	// Each step is a line read after s[0]: no more steps than those
	// lines (a cycle in a broken transcript ends there).
	for steps := l.n - held; h != 0; steps-- {
		if steps == 0 {
			l.missing, l.arrived = 0, true
			return false
		}
		n, e, ok := l.find(h)
		if !ok {
			l.missing, l.arrived = h, false
			return false // not read yet
		}
		if n <= held {
			break // read before s[0]: delivered
		}
		if e.conv {
			for j := len(s) - 1; j > 0; j-- {
				if x := rec(s[j]); x != nil && hashUUID(x.UUID) == h {
					from = append(from, j)
					break
				}
			}
		}
		h = e.parent
	}
	if len(from) == 0 {
		return true
	}
	moved := make([]T, 0, len(s))
	for k := len(from) - 1; k >= 0; k-- {
		moved = append(moved, s[from[k]])
	}
	for j := range s {
		taken := false
		for _, f := range from {
			taken = taken || f == j
		}
		if !taken {
			moved = append(moved, s[j])
		}
	}
	copy(s, moved)
	return true
}

// tailBytes is how far from its end tailUUID looks for a line's uuid.
const tailBytes = 512

var uuidKey = []byte(`"uuid"`)

// tailUUID finds the uuid member of the object t (trimmed) among its last
// tailBytes (the last tailFirst first: where Claude writes it after a
// large value): a "uuid" key after ',' whose members run to t's closing
// brace (a key of a nested object is followed by that object's own brace).
// It returns the member's value as it is in t.
func tailUUID(t []byte) ([]byte, bool) {
	if v, ok := tailUUIDFrom(t, max(0, len(t)-tailFirst), len(t)); ok {
		return v, true
	}
	if len(t) <= tailFirst {
		return nil, false
	}
	return tailUUIDFrom(t, max(0, len(t)-tailBytes), len(t)-tailFirst+len(uuidKey))
}

// tailFirst is the end of a line tailUUID looks at first.
const tailFirst = 160

// tailUUIDFrom is tailUUID for a "uuid" key that starts in t[start:end].
func tailUUIDFrom(t []byte, start, end int) ([]byte, bool) {
	for i := start; ; {
		j := bytes.Index(t[i:end], uuidKey)
		if j < 0 {
			return nil, false
		}
		k := i + j
		i = k + 1
		b := k - 1
		for b >= 0 && (t[b] == ' ' || t[b] == '\t' || t[b] == '\r' || t[b] == '\n') {
			b--
		}
		if b < 0 || t[b] != ',' {
			continue
		}
		if u, ok := membersToEnd(t, k); ok {
			return u, true
		}
	}
}

// membersToEnd reads the members of t from k to the closing brace that
// ends t, and returns the value of its uuid member.
func membersToEnd(t []byte, k int) ([]byte, bool) {
	p := peeker{b: t, i: k}
	var uuid []byte
	for {
		p.ws()
		if p.i >= len(t) || t[p.i] != '"' {
			return nil, false
		}
		key, err := p.key()
		if err != nil {
			return nil, false
		}
		p.ws()
		vs := p.i
		if p.skipValue() != nil || p.i == vs {
			return nil, false
		}
		if string(key) == "uuid" {
			if t[vs] != '"' {
				return nil, false
			}
			uuid = t[vs:p.i]
		}
		p.ws()
		switch {
		case p.i < len(t) && t[p.i] == ',':
			p.i++
		case p.i == len(t)-1 && t[p.i] == '}':
			return uuid, len(uuid) > 2
		default:
			return nil, false
		}
	}
}
