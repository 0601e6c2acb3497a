package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// pageAll reads every page of owner's list, limit at a time; between
// pages, between(n) runs after the n-th page.
func pageAll(t *testing.T, s *Store, owner string, limit int, keep func(SessionInfo) bool, between func(n int)) [][]string {
	t.Helper()
	var pages [][]string
	var after listCursor
	for n := 1; ; n++ {
		page, err := s.SessionsPage(context.Background(), owner, after, limit, keep)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, si := range page.sessions {
			ids = append(ids, si.ID)
		}
		pages = append(pages, ids)
		if page.next == "" {
			return pages
		}
		if n > 100 {
			t.Fatal("more than 100 pages")
		}
		if after, err = parseListCursor(page.next); err != nil {
			t.Fatal(err)
		}
		if between != nil {
			between(n)
		}
	}
}

// The paged list: newest first by (updated, id), pages of limit, a cursor
// that holds when sessions change between pages (a changed session moves
// to the top, where its announcement brings it; no other is skipped or
// listed twice), another owner's sessions never, a filter read within a
// bounded scan, and machines found wherever they are.
func suiteSessionsPage(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	clock := &fakeNow{t: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
	s := open(t)
	s.now = clock.now
	id := func(i int) string { return fmt.Sprintf("%08x-1111-4111-8111-111111111111", i) }
	const n = 11
	for i := range n {
		// Two at each instant: the id orders them.
		if i%2 == 0 {
			clock.advance(time.Second)
		}
		if err := s.Claim(ctx, id(i), "alice"); err != nil {
			t.Fatal(err)
		}
		info := fmt.Sprintf(`{"title":"task %d","cwd":"/w/p%d","status":"idle"}`, i, i%3)
		if i == 4 {
			info = `{"mode":"machine","machine":"laptop","title":"laptop"}`
		}
		if _, err := s.Announce(ctx, id(i), json.RawMessage(info)); err != nil {
			t.Fatal(err)
		}
	}
	s.Claim(ctx, "bbbbbbbb-2222-4222-8222-222222222222", "bob")
	all, err := s.SessionsOf(ctx, "alice")
	if err != nil || len(all) != n {
		t.Fatalf("alice's sessions: %d %v", len(all), err)
	}
	var want []string
	for _, si := range all {
		want = append(want, si.ID)
	}
	pages := pageAll(t, s, "alice", 3, nil, nil)
	if len(pages) != 4 || len(pages[0]) != 3 || len(pages[3]) != 2 || !slices.Equal(slices.Concat(pages...), want) {
		t.Fatalf("pages %v, want %v in pages of 3", pages, want)
	}
	// Exactly a page's worth: the last page says there is no next.
	if pages := pageAll(t, s, "alice", n, nil, nil); len(pages) != 1 || len(pages[0]) != n {
		t.Fatalf("one page of %d: %v", n, pages)
	}
	// Changes between pages: one already listed, one not yet listed move
	// to the top; every other session is listed once, in order.
	moved := map[string]bool{want[1]: true, want[7]: true}
	pages = pageAll(t, s, "alice", 3, nil, func(k int) {
		if k == 1 {
			clock.advance(time.Second)
			for m := range moved {
				if _, err := s.Announce(ctx, m, json.RawMessage(`{"title":"moved"}`)); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	got := slices.Concat(pages...)
	var rest []string
	for _, id := range want {
		if id == want[1] || !moved[id] {
			rest = append(rest, id)
		}
	}
	if !slices.Equal(got, rest) {
		t.Fatalf("paged while two sessions moved to the top: %v, want %v", got, rest)
	}
	// A filter: pages hold only what it keeps, however far apart.
	keep := func(si SessionInfo) bool { return strings.Contains(string(si.Info), `"/w/p1"`) }
	got = slices.Concat(pageAll(t, s, "alice", 2, keep, nil)...)
	var kept []string
	all, _ = s.SessionsOf(ctx, "alice")
	for _, si := range all {
		if keep(si) {
			kept = append(kept, si.ID)
		}
	}
	if len(kept) < 3 || !slices.Equal(got, kept) {
		t.Fatalf("filtered pages %v, want %v", got, kept)
	}
	if pages := pageAll(t, s, "bob", 3, nil, nil); len(pages) != 1 || len(pages[0]) != 1 {
		t.Fatalf("bob's pages: %v", pages)
	}
	machines, err := s.Machines(ctx, "alice")
	if err != nil || len(machines) != 1 || machines[0].ID != id(4) {
		t.Fatalf("machines: %+v %v", machines, err)
	}
}

// listKeep is the app's filter (listfilter.js matches) where the relay can
// read the summary, and keeps what it cannot read (sealed) for the app.
func TestListKeep(t *testing.T) {
	si := func(info, prompt string) SessionInfo { return SessionInfo{Info: json.RawMessage(info), Prompt: prompt} }
	plain := si(`{"title":"Fix the Build","cwd":"/home/me/src/relay","machine":"laptop","status":"busy"}`, "make ci green")
	waiting := si(`{"title":"deploy","cwd":"/srv/app","machine":"server","status":"idle","permissions":[{"id":"p"}]}`, "")
	sealed := si(`{"sealed":"AAAA","machine":"laptop","status":"idle"}`, "")
	machine := si(`{"mode":"machine","machine":"laptop","title":"laptop"}`, "")
	for _, tc := range []struct {
		f    protocol.ListFilter
		want []bool // plain, waiting, sealed, machine
	}{
		{protocol.ListFilter{Query: "build"}, []bool{true, false, true, false}},
		{protocol.ListFilter{Query: "FIX ci"}, []bool{true, false, true, false}},
		{protocol.ListFilter{Query: "~/src"}, []bool{true, false, true, false}},
		{protocol.ListFilter{Query: "server deploy"}, []bool{false, true, true, false}},
		{protocol.ListFilter{State: "working"}, []bool{true, false, true, false}},
		{protocol.ListFilter{State: "waiting"}, []bool{false, true, true, false}},
		{protocol.ListFilter{State: "finished"}, []bool{false, false, true, false}},
		{protocol.ListFilter{Machine: "server"}, []bool{false, true, true, false}},
		{protocol.ListFilter{Folder: "/home/me/src/relay"}, []bool{true, false, true, false}},
	} {
		keep, err := listKeep(&tc.f)
		if err != nil || keep == nil {
			t.Fatalf("%+v: %v", tc.f, err)
		}
		for i, s := range []SessionInfo{plain, waiting, sealed, machine} {
			if keep(s) != tc.want[i] {
				t.Errorf("%+v on %s: %v, want %v", tc.f, s.Info, keep(s), tc.want[i])
			}
		}
	}
	if keep, err := listKeep(&protocol.ListFilter{Query: "  "}); keep != nil || err != nil {
		t.Fatalf("an empty filter filters: %v", err)
	}
	for _, f := range []protocol.ListFilter{
		{State: "asleep"},
		{Query: strings.Repeat("w", 4*protocol.MaxListQuery+1)},
		{Machine: strings.Repeat("m", protocol.MaxListFilterField+1)},
		{Folder: "/" + strings.Repeat("f", protocol.MaxListFilterField)},
	} {
		if _, err := listKeep(&f); err == nil {
			t.Errorf("a bad filter was taken: state %q, %d bytes of query, %d of machine, %d of folder", f.State, len(f.Query), len(f.Machine), len(f.Folder))
		}
	}
}

// An app pages the list over the wire: the first page of limit, with the
// machines and a next cursor; the next pages after it; a filtered page;
// an app before paging still gets every session in one frame; a bad cursor
// is an error and the connection stays usable; a session announced after
// the first page comes as a FrameSession.
func TestListPaged(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	const sessions = 23
	for i := range sessions {
		info := fmt.Sprintf(`{"title":"task %d","cwd":"/w/p%d","status":"idle","mode":"remote"}`, i, i%2)
		if i == 0 {
			info = `{"mode":"machine","machine":"laptop","title":"laptop"}`
		}
		send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: fmt.Sprintf("5e55a002-0000-4000-8000-%012d", i), Info: json.RawMessage(info)})
		if f := recv(t, cli); f.Type != protocol.FrameAck {
			t.Fatalf("%+v", f)
		}
	}
	app := r.dial(t, testToken, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList, Limit: 10})
	f := recvType(t, app, protocol.FrameSessions)
	// The machine (the oldest) rides on the first page.
	if len(f.Sessions) != 11 || f.Next == "" || f.Cursor != "" || !slices.ContainsFunc(f.Sessions, func(s protocol.SessionSummary) bool { return strings.Contains(string(s.Info), `"machine"`) }) {
		t.Fatalf("first page: %d sessions, next %q", len(f.Sessions), f.Next)
	}
	seen := map[string]bool{}
	for _, s := range f.Sessions {
		seen[s.ID] = true
	}
	for pages := 1; f.Next != ""; pages++ {
		if pages > 5 {
			t.Fatal("too many pages")
		}
		next := f.Next
		send(t, app, protocol.Frame{Type: protocol.FrameList, Limit: 10, Cursor: next})
		f = recvType(t, app, protocol.FrameSessions)
		if f.Cursor != next {
			t.Fatalf("page after %q says it is after %q", next, f.Cursor)
		}
		for _, s := range f.Sessions {
			seen[s.ID] = true
		}
	}
	if len(seen) != sessions {
		t.Fatalf("%d sessions seen over the pages, want %d", len(seen), sessions)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameList, Ref: "p1", Limit: 50, Filter: &protocol.ListFilter{Folder: "/w/p1"}})
	f = recvType(t, app, protocol.FrameSessions)
	if len(f.Sessions) != sessions/2+1 || f.Next != "" || f.Ref != "p1" { // 11 in /w/p1, and the machine
		t.Fatalf("filtered page: %d sessions, next %q", len(f.Sessions), f.Next)
	}
	// One session, asked for by id; another token's or an unknown one: none.
	one := "5e55a002-0000-4000-8000-000000000005"
	send(t, app, protocol.Frame{Type: protocol.FrameList, Ref: "one", Limit: 1, Filter: &protocol.ListFilter{Session: one}})
	if f := recvType(t, app, protocol.FrameSessions); len(f.Sessions) != 1 || f.Sessions[0].ID != one || f.Ref != "one" || f.Next != "" {
		t.Fatalf("one session: %+v", f)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameList, Limit: 1, Filter: &protocol.ListFilter{Session: "5e55a002-0000-4000-8000-000000000777"}})
	if f := recvType(t, app, protocol.FrameSessions); len(f.Sessions) != 0 || f.Next != "" {
		t.Fatalf("an unknown session: %+v", f)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameList, Limit: 10, Cursor: "12.not-a-session"})
	if f := recvType(t, app, protocol.FrameError); f.Code != "bad-list" {
		t.Fatalf("bad cursor: %+v", f)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	if f := recvType(t, app, protocol.FrameSessions); len(f.Sessions) != sessions || f.Next != "" {
		t.Fatalf("an unpaged list: %d sessions", len(f.Sessions))
	}
	fresh := "5e55a002-0000-4000-8000-999999999999"
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: fresh, Info: json.RawMessage(`{"title":"new"}`)})
	if f := recvType(t, app, protocol.FrameSession); len(f.Sessions) != 1 || f.Sessions[0].ID != fresh {
		t.Fatalf("a new session: %+v", f.Sessions)
	}
}
