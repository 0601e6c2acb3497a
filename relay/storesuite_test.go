package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/pgtest"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/push"
)

// Sessions of the suite.
const (
	sA = "aaaaaaaa-1111-4111-8111-111111111111"
	sB = "bbbbbbbb-2222-4222-8222-222222222222"
	sC = "cccccccc-3333-4333-8333-333333333333"
)

// storeOpener opens the store under test: again (a second Store on the
// same database: another relay node, or the next start) when same.
type storeOpener func(t *testing.T) (open func(t *testing.T) *Store)

// The one store suite: every engine passes it.
func TestStoreSQLite(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) func(t *testing.T) *Store {
		path := filepath.Join(t.TempDir(), "relay.db")
		return func(t *testing.T) *Store { return openTestStore(t, path) }
	})
}

func TestStorePostgres(t *testing.T) {
	pg := pgtest.Start(t)
	runStoreSuite(t, func(t *testing.T) func(t *testing.T) *Store {
		url := pg.NewDatabase(t)
		return func(t *testing.T) *Store {
			t.Helper()
			s, err := OpenPostgres(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}

func runStoreSuite(t *testing.T, db storeOpener) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, open func(t *testing.T) *Store)
	}{
		{"appends", suiteAppends},
		{"concurrent appends from several nodes", suiteConcurrentNodes},
		{"sessions and owners", suiteSessions},
		{"commands", suiteCommands},
		{"deletion and retention", suiteDeletion},
		{"delete racing appends", suiteDeleteRacingAppends},
		{"delete racing claims", suiteDeleteRacingClaims},
		{"accounts and credentials", suiteCredentials},
		{"session keys and blobs", suiteKeysBlobs},
		{"push subscriptions", suitePushDevices},
		{"shared keys", suiteSharedKeys},
		{"visibility across relays", suiteVisibility},
		{"schema version", suiteSchemaVersion},
		{"session numbers", suiteSessionNumbers},
		{"paged list", suiteSessionsPage},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, db(t)) })
	}
}

// Per-session sequence numbers from 1 with no gap; a resent id gets its
// number back (Conflict when its content differs); a batch is all or
// nothing; everything survives a reopen.
func suiteAppends(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	s := open(t)
	res, err := s.Append(ctx, sA, items("a", "b", "c"))
	if err != nil || len(res) != 3 || res[2].Seq != 3 || !res[0].New {
		t.Fatalf("append: %+v %v", res, err)
	}
	res, err = s.Append(ctx, sA, []Item{{ID: "b", Body: []byte(`{"id":"b"}`)}, {ID: "d", Body: []byte(`{"id":"d"}`)}, {ID: "a", Body: []byte(`{"other":1}`)}})
	if err != nil || res[0].Seq != 2 || res[0].New || res[1].Seq != 4 || !res[1].New || res[2].Seq != 1 || !res[2].Conflict {
		t.Fatalf("resend: %+v %v", res, err)
	}
	// One id twice in a batch: stored once, the second told its number.
	res, err = s.Append(ctx, sC, []Item{{ID: "x", Body: []byte(`{"id":"x"}`)}, {ID: "y", Body: []byte(`{"id":"y"}`)}, {ID: "x", Body: []byte(`{"id":"x","other":1}`)}})
	if err != nil || !res[0].New || res[1].Seq != 2 || res[2].New || res[2].Seq != 1 || !res[2].Conflict {
		t.Fatalf("an id twice in a batch: %+v %v", res, err)
	}
	if _, err := s.Append(ctx, sA, append(items("e"), Item{})); err == nil {
		t.Fatal("a batch with an envelope without id was stored")
	}
	if last, _ := s.LastSeq(ctx, sA); last != 4 {
		t.Fatalf("last seq %d after a failed batch, want 4", last)
	}
	if res, _ := s.Append(ctx, sB, items("a")); res[0].Seq != 1 {
		t.Fatalf("another session starts at %d", res[0].Seq)
	}
	got, err := s.Read(ctx, sA, 1, 2)
	if err != nil || len(got) != 2 || got[0].ID != "b" || got[1].Seq != 3 || string(got[0].Body) != `{"id":"b"}` {
		t.Fatalf("read: %+v %v", got, err)
	}
	// The first prompt is kept for lists.
	body, _ := json.Marshal(map[string]any{"id": "p1", "role": "user", "ev": map[string]any{"t": "text", "text": "fix  the\nbuild"}})
	s.Append(ctx, sB, []Item{{ID: "p1", Body: body}})
	s.Close()
	s = open(t)
	if last, _ := s.LastSeq(ctx, sA); last != 4 {
		t.Fatalf("last seq after reopen %d", last)
	}
	if res, _ := s.Append(ctx, sA, items("d", "f")); res[0].Seq != 4 || res[1].Seq != 5 {
		t.Fatalf("after reopen: %+v", res)
	}
	if last, _ := s.LastSeq(ctx, "99999999-9999-4999-8999-999999999999"); last != 0 {
		t.Fatalf("a session never seen has last seq %d", last)
	}
	si, err := s.session(ctx, sB)
	if err != nil || si.Prompt != "fix the build" || si.LastSeq != 2 {
		t.Fatalf("session: %+v %v", si, err)
	}
}

// Several nodes (Stores on one database: PostgreSQL; SQLite has one
// relay process per file, so its three writers share one Store) append to
// the same sessions at once, some ids sent by more than one: each
// session's numbers are dense and unique, each id stored once.
func suiteConcurrentNodes(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	first := open(t)
	nodes := []*Store{first, first, first}
	if first.w.d == postgresSQL {
		nodes = []*Store{first, open(t), open(t)}
	}
	var wg sync.WaitGroup
	for n, s := range nodes {
		for _, session := range []string{sA, sB} {
			wg.Go(func() {
				for i := range 40 {
					batch := items(fmt.Sprintf("n%d-%d", n, i), fmt.Sprintf("shared-%d", i))
					if _, err := s.Append(ctx, session, batch); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for _, session := range []string{sA, sB} {
		all, err := nodes[0].Read(ctx, session, 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3*40+40 {
			t.Fatalf("%s: %d stored, want %d", session, len(all), 3*40+40)
		}
		seen := map[string]bool{}
		for i, st := range all {
			if st.Seq != int64(i+1) || seen[st.ID] {
				t.Fatalf("%s row %d: seq %d id %s", session, i, st.Seq, st.ID)
			}
			seen[st.ID] = true
		}
		if last, _ := nodes[2].LastSeq(ctx, session); last != int64(len(all)) {
			t.Fatalf("%s: last seq %d, %d stored", session, last, len(all))
		}
	}
}

// A session belongs to the first owner that claims it; announcements
// replace the info; lists are per owner, most recent first.
func suiteSessions(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	clock := &fakeNow{t: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)}
	s := open(t)
	s.now = clock.now
	if err := s.Claim(ctx, sA, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.Claim(ctx, sA, "alice"); err != nil {
		t.Fatalf("claimed again by its owner: %v", err)
	}
	if err := s.Claim(ctx, sA, "bob"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("claimed by another: %v", err)
	}
	if o, err := s.OwnerOf(ctx, sA); o != "alice" || err != nil {
		t.Fatalf("owner %q %v", o, err)
	}
	if _, err := s.OwnerOf(ctx, sC); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("owner of nothing: %v", err)
	}
	clock.advance(time.Second)
	s.Claim(ctx, sB, "alice")
	clock.advance(time.Second)
	s.Claim(ctx, sC, "bob")
	si, err := s.Announce(ctx, sA, json.RawMessage(`{"title":"first"}`))
	if err != nil || string(si.Info) != `{"title":"first"}` || si.Owner != "alice" {
		t.Fatalf("announce: %+v %v", si, err)
	}
	if _, err := s.Announce(ctx, sA, json.RawMessage(`[1]`)); err == nil {
		t.Fatal("an info that is not an object was stored")
	}
	list, err := s.SessionsOf(ctx, "alice")
	if err != nil || len(list) != 2 || list[0].ID != sA || list[1].ID != sB {
		t.Fatalf("alice's sessions: %+v %v", list, err)
	}
	all, _ := s.Sessions(ctx)
	if len(all) != 3 {
		t.Fatalf("all sessions: %d", len(all))
	}
}

// Commands: stored once per (owner, session, id); status moves one way;
// pending ones come back oldest first; queued ones counted, expired and
// pruned.
func suiteCommands(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	clock := &fakeNow{t: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)}
	s := open(t)
	s.now = clock.now
	for _, id := range []string{"c1", "c2", "c3"} {
		if _, fresh, err := s.AddCommand(ctx, "alice", sA, id, []byte(`{"id":"`+id+`"}`), protocol.StatusQueued, ""); !fresh || err != nil {
			t.Fatalf("add %s: %v %v", id, fresh, err)
		}
	}
	if c, fresh, err := s.AddCommand(ctx, "alice", sA, "c1", []byte(`{"x":1}`), protocol.StatusQueued, ""); fresh || err != nil || string(c.Body) != `{"id":"c1"}` {
		t.Fatalf("add again: %+v %v %v", c, fresh, err)
	}
	// The same id in another owner's session is another command.
	if _, fresh, _ := s.AddCommand(ctx, "bob", sA, "c1", []byte(`{}`), protocol.StatusQueued, ""); !fresh {
		t.Fatal("an id is global")
	}
	if n, _ := s.CountQueued(ctx, "alice", sA); n != 3 {
		t.Fatalf("%d queued", n)
	}
	if moved, _, _ := s.AdvanceCommand(ctx, "alice", sA, "c1", protocol.StatusDelivered, ""); !moved {
		t.Fatal("queued → delivered refused")
	}
	if moved, _, _ := s.AdvanceCommand(ctx, "alice", sA, "c1", protocol.StatusDone, ""); !moved {
		t.Fatal("delivered → done refused")
	}
	if moved, c, _ := s.AdvanceCommand(ctx, "alice", sA, "c1", protocol.StatusRejected, "late"); moved || c.Status != protocol.StatusDone {
		t.Fatalf("a final status moved: %v %+v", moved, c)
	}
	if moved, _, _ := s.AdvanceCommand(ctx, "alice", sA, "c2", protocol.StatusDelivered, ""); !moved {
		t.Fatal("delivered refused")
	}
	pending, err := s.PendingCommands(ctx, "alice", sA)
	if err != nil || len(pending) != 2 || pending[0].ID != "c2" || pending[1].ID != "c3" {
		t.Fatalf("pending: %+v %v", pending, err)
	}
	clock.advance(time.Hour)
	expired, err := s.ExpirePending(ctx, clock.now().Add(-time.Minute), "too old")
	if err != nil || len(expired) != 3 { // c2, c3 and bob's c1
		t.Fatalf("expired: %+v %v", expired, err)
	}
	if c, _ := s.Command(ctx, "alice", sA, "c3"); c.Status != protocol.StatusRejected || c.Message != "too old" {
		t.Fatalf("expired command: %+v", c)
	}
	clock.advance(time.Hour)
	if n, err := s.PruneCommands(ctx, clock.now().Add(-time.Minute)); n != 4 || err != nil {
		t.Fatalf("pruned %d %v", n, err)
	}
}

// A deleted session leaves a tombstone: appends to it are refused; another
// owner cannot delete it; inactive sessions are pruned oldest first.
func suiteDeletion(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	clock := &fakeNow{t: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)}
	s := open(t)
	s.now = clock.now
	for _, id := range []string{sA, sB, sC} {
		s.Claim(ctx, id, "alice")
		s.Append(ctx, id, items("a"))
		s.AddCommand(ctx, "alice", id, "c1", []byte(`{}`), protocol.StatusQueued, "")
		clock.advance(time.Minute)
	}
	if err := s.DeleteSession(ctx, "bob", sA); !errors.Is(err, ErrForbidden) {
		t.Fatalf("deleted by another: %v", err)
	}
	if err := s.DeleteSession(ctx, "alice", sA); err != nil {
		t.Fatal(err)
	}
	if gone, _ := s.Deleted(ctx, sA); !gone {
		t.Fatal("no tombstone")
	}
	if _, err := s.Append(ctx, sA, items("b")); !errors.Is(err, ErrDeleted) {
		t.Fatalf("append to a deleted session: %v", err)
	}
	if _, err := s.Command(ctx, "alice", sA, "c1"); err == nil {
		t.Fatal("its commands stayed")
	}
	gone, err := s.PruneInactive(ctx, clock.now().Add(-90*time.Second), 10)
	if err != nil || len(gone) != 1 || gone[0].ID != sB {
		t.Fatalf("pruned %+v %v", gone, err)
	}
	if left, _ := s.SessionsOf(ctx, "alice"); len(left) != 1 || left[0].ID != sC {
		t.Fatalf("left %+v", left)
	}
	if s.SizeBytes(ctx) <= 0 {
		t.Fatal("no size")
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// Accounts, credentials (stored as hashes), their names, and the move of a
// token's sessions to an account.
func suiteCredentials(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	s := open(t)
	def, err := s.DefaultAccount(ctx, "acct-default")
	if err != nil || def != "acct-default" {
		t.Fatalf("default account %q %v", def, err)
	}
	if again, _ := s.DefaultAccount(ctx, "other"); again != "acct-default" {
		t.Fatalf("default account changed to %q", again)
	}
	if err := s.EnsureAccount(ctx, "acct-2", "team"); err != nil {
		t.Fatal(err)
	}
	c, secret, err := s.AddCredential(ctx, def, "device", "phone", []byte{1, 2, 3})
	if err != nil || c.Name != "phone" || secret == "" {
		t.Fatalf("add: %+v %v", c, err)
	}
	c2, _, _ := s.AddCredential(ctx, def, "machine", "phone", nil)
	if c2.Name == "phone" {
		t.Fatal("a name given twice")
	}
	got, err := s.CredentialBySecret(ctx, secret)
	if err != nil || got.ID != c.ID || string(got.PublicKey) != "\x01\x02\x03" {
		t.Fatalf("by secret: %+v %v", got, err)
	}
	if _, err := s.CredentialBySecret(ctx, secret+"x"); err == nil {
		t.Fatal("a wrong secret found a credential")
	}
	if list, _ := s.Credentials(ctx, def); len(list) != 2 {
		t.Fatalf("%d credentials", len(list))
	}
	if f, err := s.FindCredential(ctx, def, "phone"); err != nil || f.ID != c.ID {
		t.Fatalf("find: %+v %v", f, err)
	}
	if name, err := s.RenameCredential(ctx, def, c.ID, "tablet"); err != nil || name != "tablet" {
		t.Fatalf("rename: %q %v", name, err)
	}
	if err := s.TouchCredential(ctx, c.ID, "127.0.0.1", time.Unix(1795373975, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCredential(ctx, def, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CredentialBySecret(ctx, secret); err == nil {
		t.Fatal("a deleted credential found")
	}
	// A token's sessions and commands move to the account; a command id
	// the account already has in that session stays put.
	s.Claim(ctx, sA, "old-token")
	s.AddCommand(ctx, "old-token", sA, "c1", []byte(`{}`), protocol.StatusQueued, "")
	s.AddCommand(ctx, "old-token", sA, "c2", []byte(`{}`), protocol.StatusQueued, "")
	s.AddCommand(ctx, def, sA, "c2", []byte(`{}`), protocol.StatusQueued, "")
	if n, err := s.AdoptSessions(ctx, "old-token", def); n != 1 || err != nil {
		t.Fatalf("adopted %d %v", n, err)
	}
	if o, _ := s.OwnerOf(ctx, sA); o != def {
		t.Fatalf("owner %q", o)
	}
	if _, err := s.Command(ctx, def, sA, "c1"); err != nil {
		t.Fatalf("command not moved: %v", err)
	}
}

func suiteKeysBlobs(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	s := open(t)
	keys := []protocol.WrappedKey{{Device: "d1", Wrapped: "w1"}, {Device: "d2", Wrapped: "w2"}}
	if err := s.PutSessionKeys(ctx, sA, "m1", keys); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSessionKeys(ctx, sA, "m2", keys[:1]); err != nil {
		t.Fatal(err)
	}
	if w, m, err := s.SessionKeyFor(ctx, sA, "d1"); w != "w1" || m != "m2" || err != nil {
		t.Fatalf("key: %q %q %v", w, m, err)
	}
	if _, _, err := s.SessionKeyFor(ctx, sA, "d3"); !errors.Is(err, ErrNoSessionKey) {
		t.Fatalf("no key: %v", err)
	}
	// A session is sealed once it has a key, or was announced sealed.
	if _, err := s.Announce(ctx, sB, json.RawMessage(`{"mode":"remote","sealed":"AAAA"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Announce(ctx, sC, json.RawMessage(`{"mode":"remote","title":"plain"}`)); err != nil {
		t.Fatal(err)
	}
	for session, want := range map[string]bool{sA: true, sB: true, sC: false, "5e55a001-0000-4000-8000-00000000ffff": false} {
		if got, err := s.SessionSealed(ctx, session); got != want || err != nil {
			t.Errorf("SessionSealed(%s) = %v, %v; want %v", session, got, err, want)
		}
	}
	blob := make([]byte, 300<<10)
	for i := range blob {
		blob[i] = byte(i)
	}
	if _, err := s.Append(ctx, sA, []Item{{ID: "img", Body: []byte(`{}`), Blob: blob}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Blob(ctx, sA, "img"); err != nil || len(got) != len(blob) || got[1000] != blob[1000] {
		t.Fatalf("blob: %d bytes, %v", len(got), err)
	}
	if _, err := s.Blob(ctx, sA, "none"); !errors.Is(err, ErrNoBlob) {
		t.Fatalf("no blob: %v", err)
	}
}

// The database records its schema version; one from a newer ccrelay is
// refused, with a message that says so.
func suiteSchemaVersion(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	s := open(t)
	var v int
	if err := s.w.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("schema version %d %v, want %d", v, err, SchemaVersion())
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_ms) VALUES (?, 'from the future', 0)`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	err := migrate(ctx, s.w)
	if err == nil || !strings.Contains(err.Error(), "newer ccrelay") {
		t.Fatalf("a newer schema: %v", err)
	}
}

// Push subscriptions: one per (owner, device), replaced by a new one; at
// most max per owner, the least recently updated making room; removed
// by device, only if unchanged when asked so, and by credential; imported
// keeping the more recent; seen by the next Store on the database.
func suitePushDevices(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	s := open(t)
	sub := func(name string) push.Subscription {
		var p push.Subscription
		p.Endpoint = "https://push.example.net/" + name
		p.Keys.P256dh, p.Keys.Auth = "key-"+name, "auth-"+name
		return p
	}
	dev := func(name string, updated int64, kinds ...string) pushDevice {
		return pushDevice{Sub: sub(name), Kinds: kinds, Updated: updated}
	}
	devices := func(s *Store, owner string) string {
		t.Helper()
		all, err := s.pushDevicesOf(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for k, d := range all {
			out = append(out, fmt.Sprintf("%s=%s%v@%d", k, d.Sub.Endpoint[len("https://push.example.net/"):], d.Kinds, d.Updated))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	const max = 3
	for _, step := range []struct {
		what       string
		owner, dev string
		d          pushDevice
		alice, bob string
	}{
		{"first", "alice", "c1:a", dev("a", 10, PushTurn), "c1:a=a[turn]@10", ""},
		{"another owner", "bob", "c1:a", dev("b", 11), "c1:a=a[turn]@10", "c1:a=b[]@11"},
		{"replaced", "alice", "c1:a", dev("a2", 12, PushTurn, PushFailed), "c1:a=a2[turn failed]@12", "c1:a=b[]@11"},
		{"second", "alice", "c2:b", dev("b", 13, PushAgent), "c1:a=a2[turn failed]@12 c2:b=b[agent]@13", "c1:a=b[]@11"},
		{"third", "alice", "c10:c", dev("c", 14), "c10:c=c[]@14 c1:a=a2[turn failed]@12 c2:b=b[agent]@13", "c1:a=b[]@11"},
		{"one beyond: the least recent goes", "alice", "c3:d", dev("d", 15), "c10:c=c[]@14 c2:b=b[agent]@13 c3:d=d[]@15", "c1:a=b[]@11"},
		{"replaced at the bound: none goes", "alice", "c2:b", dev("b2", 16), "c10:c=c[]@14 c2:b=b2[]@16 c3:d=d[]@15", "c1:a=b[]@11"},
	} {
		if err := s.putPushDevice(ctx, step.owner, step.dev, step.d, max); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if a, b := devices(s, "alice"), devices(s, "bob"); a != step.alice || b != step.bob {
			t.Fatalf("%s:\n alice %s, want %s\n bob %s, want %s", step.what, a, step.alice, b, step.bob)
		}
	}
	if d, ok, err := s.pushDevice(ctx, "alice", "c2:b"); !ok || err != nil || d.Sub != sub("b2") || d.Updated != 16 {
		t.Fatalf("get: %+v %v %v", d, ok, err)
	}
	if _, ok, err := s.pushDevice(ctx, "bob", "c2:b"); ok || err != nil {
		t.Fatalf("another owner's device: %v %v", ok, err)
	}
	// Removed only if unchanged, when asked so.
	old := sub("b")
	if gone, err := s.deletePushDevice(ctx, "alice", "c2:b", &old); gone || err != nil {
		t.Fatalf("a replaced subscription removed: %v %v", gone, err)
	}
	now := sub("b2")
	if gone, err := s.deletePushDevice(ctx, "alice", "c2:b", &now); !gone || err != nil {
		t.Fatalf("the current subscription not removed: %v %v", gone, err)
	}
	if gone, err := s.deletePushDevice(ctx, "alice", "c3:d", nil); !gone || err != nil {
		t.Fatalf("delete: %v %v", gone, err)
	}
	// A credential's devices, of every owner; an id that is a prefix of
	// another, or holds LIKE's wildcards, removes no other's.
	s.putPushDevice(ctx, "alice", "c1:x", dev("x", 20), max)
	s.putPushDevice(ctx, "bob", "c_:y", dev("y", 21), max)
	if n, err := s.forgetPushDevices(ctx, "c1"); n != 2 || err != nil {
		t.Fatalf("forgot %d %v, want alice's and bob's c1:", n, err)
	}
	if n, _ := s.forgetPushDevices(ctx, "c%"); n != 0 {
		t.Fatalf("c%% forgot %d", n)
	}
	if a, b := devices(s, "alice"), devices(s, "bob"); a != "c10:c=c[]@14" || b != "c_:y=y[]@21" {
		t.Fatalf("after forgetting c1: alice %s, bob %s", a, b)
	}
	// An older relay's file: the more recent of each device, max each.
	n, err := s.importPushDevices(ctx, map[string]map[string]*pushDevice{
		"alice": {"c10:c": ptr(dev("c-old", 9)), "f1": ptr(dev("f1", 1)), "f2": ptr(dev("f2", 2)), "f3": ptr(dev("f3", 3))},
		"carol": {"f4": ptr(dev("f4", 4, PushPermission)), "": ptr(dev("nameless", 5)), "nil": nil},
	}, max)
	if err != nil || n != 5 {
		t.Fatalf("imported %d %v", n, err)
	}
	again := open(t)
	for owner, want := range map[string]string{"alice": "c10:c=c[]@14 f2=f2[]@2 f3=f3[]@3", "bob": "c_:y=y[]@21", "carol": "f4=f4[permission]@4"} {
		if got := devices(again, owner); got != want {
			t.Errorf("%s after the import, on the next Store: %s, want %s", owner, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// The VAPID key pair: the first PushKeys stores one (an older relay's key
// file when the folder has one); every Store on the database, even
// starting at once and with other key files, then gets that one.
func suiteSharedKeys(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	folder := func(t *testing.T) (string, *push.Keys) {
		dir := t.TempDir()
		k, _ := push.NewKeys()
		b, _ := push.MarshalKeys(k)
		if err := os.WriteFile(filepath.Join(dir, push.KeyFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir, k
	}
	dir, old := folder(t)
	first := open(t)
	nodes := []*Store{first, first, first, first}
	if first.w.d == postgresSQL {
		nodes = []*Store{first, open(t), open(t), open(t)}
	}
	got := make([]string, len(nodes))
	var wg sync.WaitGroup
	for i, s := range nodes {
		d := dir
		if i > 0 {
			d, _ = folder(t) // another relay's folder, with another key
		}
		if i == len(nodes)-1 {
			d = "" // no folder
		}
		wg.Go(func() {
			k, err := s.PushKeys(ctx, d)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = k.PublicKey()
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] || got[i] == "" {
			t.Fatalf("relays starting at once got keys %q", got)
		}
	}
	later, _ := folder(t)
	k, err := open(t).PushKeys(ctx, later)
	if err != nil || k.PublicKey() != got[0] {
		t.Fatalf("a later start: %v, another key", err)
	}
	// One serial start from the folder with a key file imports it.
	s := open(t)
	if _, err := s.w.ExecContext(ctx, `DELETE FROM relay_keys`); err != nil {
		t.Fatal(err)
	}
	if k, err := s.PushKeys(ctx, dir); err != nil || k.PublicKey() != old.PublicKey() {
		t.Fatalf("the folder's key file was not imported: %v", err)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE relay_keys SET value = 'garbage'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PushKeys(ctx, dir); err == nil {
		t.Fatal("a garbage key in the store was taken")
	}
}

// What relays' app connections show: by node and connection, replaced,
// removed one by one or a node's all at once; rows not refreshed since
// the time asked are not counted; refreshing counts them again.
func suiteVisibility(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	s := open(t)
	other := s
	if s.w.d == postgresSQL {
		other = open(t)
	}
	put := func(s *Store, node string, conn int64, owner, device, session string, visible bool) {
		t.Helper()
		if err := s.putVisible(ctx, node, conn, pushVisibility{owner: owner, device: device, session: session, visible: visible}); err != nil {
			t.Fatal(err)
		}
	}
	shown := func(owner, session string, since time.Time) string {
		t.Helper()
		d, err := other.visibleDevices(ctx, owner, session, since)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range d {
			out = append(out, k)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	past := time.Now().Add(-time.Minute)
	put(s, "n1", 1, "alice", "phone", sA, true)
	put(s, "n1", 2, "alice", "laptop", sA, false)
	put(s, "n2", 1, "alice", "tablet", sA, true)
	put(s, "n2", 2, "alice", "", sA, true)
	put(s, "n2", 3, "bob", "phone", sA, true)
	put(s, "n2", 4, "alice", "watch", sB, true)
	for _, tc := range []struct {
		what  string
		do    func()
		want  string
		since time.Time
	}{
		{"as put", func() {}, " phone tablet", past},
		{"a connection shows another session", func() { put(s, "n1", 1, "alice", "phone", sB, true) }, " tablet", past},
		{"a connection hidden", func() { put(s, "n2", 1, "alice", "tablet", sA, false) }, "", past},
		{"a connection shown", func() { put(s, "n1", 2, "alice", "laptop", sA, true) }, " laptop", past},
		{"a connection gone", func() { s.dropVisible(ctx, "n2", 2) }, "laptop", past},
		{"not refreshed since", func() {}, "", time.Now().Add(10 * time.Second)},
		{"refreshed", func() { s.refreshVisible(ctx, "n1", time.Now().Add(30*time.Second)) }, "laptop", time.Now().Add(10 * time.Second)},
		{"a node gone", func() { s.dropVisible(ctx, "n1", -1) }, "", past},
	} {
		tc.do()
		if got := shown("alice", sA, tc.since); got != tc.want {
			t.Fatalf("%s: shown to %q, want %q", tc.what, got, tc.want)
		}
	}
	if got := shown("alice", sB, past); got != "watch" {
		t.Fatalf("alice's %s: %q", sB, got)
	}
	// Rows of a relay that stopped refreshing long ago are removed.
	if err := s.refreshVisible(ctx, "n3", time.Now().Add(visibleForgotten+time.Minute)); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM push_visible`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows left (%v), want the stale ones removed", left, err)
	}
}

// A session's number is drawn once, when the session is made: appends,
// claims and announcements of an existing session use none up
// (PostgreSQL draws a sequence's next value even for an insert that then
// meets a conflict). The last number a session may have is read back.
func suiteSessionNumbers(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	s := open(t)
	no := func(session string) int64 {
		t.Helper()
		var n int64
		if err := s.w.QueryRowContext(ctx, `SELECT no FROM sessions WHERE id = ?`, session).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	owner := OwnerID(testToken)
	if err := s.Claim(ctx, sA, owner); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := s.Append(ctx, sA, items(fmt.Sprint("n", i))); err != nil {
			t.Fatal(err)
		}
		if err := s.Claim(ctx, sA, owner); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Announce(ctx, sA, json.RawMessage(`{"status":"idle"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Announce(ctx, sB, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if a, b := no(sA), no(sB); b != a+1 {
		t.Fatalf("session numbers %d then %d: the appends, claims and announcements of the first used numbers up", a, b)
	}
	// The last number: its envelopes are read back.
	if _, err := s.w.ExecContext(ctx, `INSERT INTO sessions (id, no, created_ms, updated_ms) VALUES (?, ?, 1, 1)`, sC, int64(maxSessionNo)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, sC, items("last1", "last2")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read(ctx, sC, 0, 10); err != nil || len(got) != 2 || got[1].Seq != 2 {
		t.Fatalf("the session numbered %d reads %+v %v", int64(maxSessionNo), got, err)
	}
	// A session holds at most maxSeq envelopes: a batch past it is
	// refused whole.
	if _, err := s.w.ExecContext(ctx, `UPDATE sessions SET last_seq = ? WHERE id = ?`, int64(maxSeq-1), sC); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, sC, items("over1", "over2")); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("a batch past the last sequence number: %v", err)
	}
	if res, err := s.Append(ctx, sC, items("last")); err != nil || res[0].Seq != maxSeq {
		t.Fatalf("the last envelope: %+v %v", res, err)
	}
	if got, err := s.Read(ctx, sC, maxSeq-1, 10); err != nil || len(got) != 1 || got[0].ID != "last" {
		t.Fatalf("the last envelope reads %+v %v", got, err)
	}
}
