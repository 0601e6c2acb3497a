package launcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Bounds on the permission requests a session's state shows the app. The
// state is announced as the session's info, which the relay refuses over
// protocol.MaxInfoBytes: a request shown whole (a Write of megabytes, a
// patch's diffs) would never reach the app, and the turn would wait for an
// answer forever. What is shown is cut; the answer still allows or denies
// the input the agent asked with, never the one shown.
const (
	// MaxShownString bounds each string of a shown input, and a request's
	// description: a longer one is cut on a UTF-8 boundary and ends with
	// a marker saying how many bytes are not shown.
	MaxShownString = 8 << 10
	// MaxShownItems bounds each list of a shown input.
	MaxShownItems = 100
	// MaxShownRequest bounds one shown request's input (its JSON): an
	// input still longer once its strings are cut is cut harder, and
	// left out if even that is too long.
	MaxShownRequest = 32 << 10
	// MaxShownPermissions bounds all the shown requests together (their
	// JSON): past it, requests are shown without their input.
	MaxShownPermissions = 256 << 10
	// MaxShownRules bounds the rules (or paths) a request lists for
	// "allow for this session"; the last one shown then says how many
	// more there are.
	MaxShownRules = 16
	// maxShownRule bounds each of those rules.
	maxShownRule = 1 << 10
)

// clipShown cuts what pr shows the app to the bounds above and marks it
// Clipped when its input was cut (a cut description or rule says so in
// its own text). The request's answer does not depend on
// what is shown (the original input is kept apart: asked, or the agent's
// own request).
func clipShown(pr *PermissionRequest) {
	if len(pr.Description) > MaxShownString {
		pr.Description = cutString(pr.Description, MaxShownString)
	}
	if len(pr.BlockedPath) > MaxShownString {
		pr.BlockedPath = cutString(pr.BlockedPath, MaxShownString)
	}
	if len(pr.ForSession) > 0 {
		rules := make([]string, 0, min(len(pr.ForSession), MaxShownRules))
		for i, r := range pr.ForSession {
			if i == MaxShownRules-1 && len(pr.ForSession) > MaxShownRules {
				rules = append(rules, fmt.Sprintf("and %d more", len(pr.ForSession)-i))
				break
			}
			if len(r) > maxShownRule {
				r = cutString(r, maxShownRule)
			}
			rules = append(rules, r)
		}
		pr.ForSession = rules
	}
	if len(pr.Input) <= MaxShownRequest {
		return
	}
	pr.Clipped = true
	var v any
	d := json.NewDecoder(bytes.NewReader(pr.Input))
	d.UseNumber()
	if d.Decode(&v) != nil {
		pr.Input = nil
		return
	}
	for n := MaxShownString; n >= 64; n /= 4 {
		b, err := json.Marshal(cutValue(v, n))
		if err == nil && len(b) <= MaxShownRequest {
			pr.Input = b
			return
		}
	}
	pr.Input = nil
}

// cutValue is v with each string cut to n bytes and each list to
// MaxShownItems.
func cutValue(v any, n int) any {
	switch v := v.(type) {
	case string:
		if len(v) > n {
			return cutString(v, n)
		}
		return v
	case []any:
		out := make([]any, 0, min(len(v), MaxShownItems+1))
		for i, e := range v {
			if i == MaxShownItems {
				out = append(out, fmt.Sprintf("… %d more items not shown", len(v)-i))
				break
			}
			out = append(out, cutValue(e, n))
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if len(k) > n {
				k = cutString(k, n)
			}
			out[k] = cutValue(e, n)
		}
		return out
	}
	return v
}

// cutString is s cut to at most n bytes on a UTF-8 boundary, with a
// marker saying how many bytes are not shown.
func cutString(s string, n int) string {
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf("… [%d more bytes not shown]", len(s)-i)
}

// shownPermissions are the requests as the app is shown them: past
// MaxShownPermissions bytes in all, in brief (briefShown).
func shownPermissions(reqs []PermissionRequest) []PermissionRequest {
	total := 0
	for i := range reqs {
		b, _ := json.Marshal(reqs[i])
		if total+len(b) > MaxShownPermissions {
			briefShown(&reqs[i])
			b, _ = json.Marshal(reqs[i])
		}
		total += len(b)
	}
	return reqs
}

// briefShown cuts a request to what the app needs to name and answer it:
// no input, a description, path and rules of a few hundred bytes.
func briefShown(pr *PermissionRequest) {
	const n = 256
	pr.Input, pr.Clipped = nil, true
	if len(pr.Description) > 4*n {
		pr.Description = cutString(pr.Description, 4*n)
	}
	if len(pr.BlockedPath) > 4*n {
		pr.BlockedPath = cutString(pr.BlockedPath, 4*n)
	}
	// A copy: the list is the waiting request's own.
	if len(pr.ForSession) > 4 {
		pr.ForSession = append(slices.Clone(pr.ForSession[:3]), fmt.Sprintf("and %d more", len(pr.ForSession)-3))
	} else {
		pr.ForSession = slices.Clone(pr.ForSession)
	}
	for i, r := range pr.ForSession {
		if len(r) > n {
			pr.ForSession[i] = cutString(r, n)
		}
	}
}
