package launcher

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ccrelay/ccrelay/protocol"
)

// TestRemoteBigPermissionShown: a Write of 2 MB that asks permission in
// remote mode is announced clipped, well within the relay's bound on an
// announcement, and marked clipped; allowing it runs the whole input
// Claude asked with, and an edited input for it is refused.
func TestRemoteBigPermissionShown(t *testing.T) {
	content := strings.Repeat("é", 1<<20) // 2 MB
	rig := newRemoteRig(t, map[string]any{"turns": []any{steps(
		map[string]any{"tool": map[string]any{"id": "toolu_w", "name": "Write", "ask": true, "result": "wrote",
			"input": map[string]any{"file_path": "big.txt", "content": content}}},
		map[string]any{"text": "Done."})}}, RemoteOptions{})
	rig.prompt("write a big file")
	st := rig.untilState("a permission request", func(s SessionState) bool { return len(s.Permissions) == 1 })
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxShownPermissions+4096 || len(b) > protocol.MaxInfoBytes {
		t.Fatalf("the state is %d bytes: the relay refuses more than %d", len(b), protocol.MaxInfoBytes)
	}
	p := st.Permissions[0]
	var in map[string]string
	if err := json.Unmarshal(p.Input, &in); err != nil {
		t.Fatalf("shown input %.200s: %v", p.Input, err)
	}
	if !p.Clipped || in["file_path"] != "big.txt" || !strings.HasPrefix(in["content"], "éé") || !utf8.ValidString(in["content"]) ||
		!strings.Contains(in["content"], "more bytes not shown") || len(p.Input) > MaxShownRequest {
		t.Fatalf("shown: clipped %v, %d bytes, content %.80q…", p.Clipped, len(p.Input), in["content"])
	}
	rig.until("tool call start", has("TCS(toolu_w", 1))
	if err := rig.r.Answer(p.ID, true, p.Input, false, ""); err == nil {
		t.Fatal("an edited input for a clipped request was taken")
	}
	if err := rig.r.Answer(p.ID, true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	d := rig.until("turn end", has("TE(completed)", 1))
	// The tool's result echoes the input Claude ran with (cut by the
	// mapper): the content as asked, not the clipped one.
	if count(d, `TCE(toolu_w "wrote input=`) != 1 {
		t.Fatalf("results %.2000v", d)
	}
	for _, e := range rig.out.Envelopes() {
		if e.Ev.T == protocol.KindToolCallEnd && e.Ev.Call == "toolu_w" &&
			(len(e.Blob) < 64<<10 || strings.Contains(string(e.Blob), "not shown")) {
			t.Fatalf("Claude ran with %d bytes of input: %.100q…", len(e.Blob), e.Blob)
		}
	}
}

// TestShownPermissions: each request is cut to its bound, and requests
// waiting together, each within it, are within the relay's bound on an
// announcement together (past MaxShownPermissions, without their input);
// what fits is shown as it is.
func TestShownPermissions(t *testing.T) {
	big := func(n int) PermissionRequest {
		pr := PermissionRequest{ID: "r", Tool: "Write", Input: mustJSON(map[string]any{"file_path": "a", "content": strings.Repeat("x", n),
			"edits": make([]int, 3*MaxShownItems)}), Description: strings.Repeat("d", 2*MaxShownString)}
		clipShown(&pr)
		return pr
	}
	for _, tc := range []struct {
		name        string
		reqs        []PermissionRequest
		wantClipped int
	}{
		{"small ones shown whole", []PermissionRequest{{ID: "a", Tool: "Bash", Input: json.RawMessage(`{"command":"ls"}`)}}, 0},
		{"one big", []PermissionRequest{big(4 << 20)}, 1},
		{"as many as an info lists, each near its bound", func() []PermissionRequest {
			var reqs []PermissionRequest
			for range protocol.MaxInfoPermissions {
				reqs = append(reqs, big(2*MaxShownRequest))
			}
			return reqs
		}(), protocol.MaxInfoPermissions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shown := shownPermissions(tc.reqs)
			b, _ := json.Marshal(SessionState{Permissions: shown})
			if len(b) > MaxShownPermissions+MaxShownRequest+len(shown)*(MaxShownString+1024) || len(b) > protocol.MaxInfoBytes/2 {
				t.Fatalf("%d requests shown in %d bytes", len(shown), len(b))
			}
			clipped := 0
			for _, p := range shown {
				if p.Clipped {
					clipped++
				}
				if len(p.Input) > MaxShownRequest || len(p.Description) > MaxShownString+64 || (p.Input != nil && !json.Valid(p.Input)) {
					t.Fatalf("shown %d bytes of input, %d of description", len(p.Input), len(p.Description))
				}
			}
			if shown[0].Input == nil {
				t.Fatal("the first request is shown without its input")
			}
			if clipped != tc.wantClipped {
				t.Fatalf("%d clipped, want %d", clipped, tc.wantClipped)
			}
		})
	}
}

// TestBriefShownCopies: a request shown in brief leaves the waiting
// request's own rules as they were.
func TestBriefShownCopies(t *testing.T) {
	rules := []string{strings.Repeat("r", 1000), "b"}
	pr := PermissionRequest{ID: "a", ForSession: rules}
	briefShown(&pr)
	if len(rules[0]) != 1000 || len(pr.ForSession[0]) >= 1000 {
		t.Fatalf("the request's rule is %d bytes, the shown one %d", len(rules[0]), len(pr.ForSession[0]))
	}
}
