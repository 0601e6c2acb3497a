package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ccrelay/ccrelay/protocol"
)

// A paged list (FrameList with Limit): the newest sessions first, a page at
// a time, each page ending with a cursor the next one starts after. The
// order is (updated_ms DESC, id ASC) and a page starts strictly after its
// cursor (keyset, not an offset), so a session that changes while the app
// pages moves to the top, where its FrameSession brings it, and no other
// session is skipped or listed twice because of it.
const (
	// MaxListLimit is the most sessions one page holds.
	MaxListLimit = 200
	// listPageBytes is what a page's summaries may reach before it ends
	// early (it holds at least one session): a phone's page stays small
	// even when summaries are large.
	listPageBytes = 48 << 10
	// listScanBudget is the most rows one filtered page reads: a filter
	// that matches little answers with fewer sessions (maybe none) and a
	// cursor to go on from, rather than reading the whole table at once.
	listScanBudget = 2000
)

// listCursor is where a page ended: the last session it read.
type listCursor struct {
	updated int64
	id      string
}

// String is the cursor as the app sees it (opaque to the app).
func (c listCursor) String() string {
	if c.id == "" {
		return ""
	}
	return strconv.FormatInt(c.updated, 10) + "." + c.id
}

func parseListCursor(s string) (listCursor, error) {
	if s == "" {
		return listCursor{}, nil
	}
	ms, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || n < 0 || checkSession(id) != nil {
		return listCursor{}, fmt.Errorf("cursor %.80q is not one the relay gave", s)
	}
	return listCursor{updated: n, id: id}, nil
}

// listPage is one page of sessions and where the next one starts ("" when
// this was the last).
type listPage struct {
	sessions []SessionInfo
	next     string
}

// SessionsPage lists up to limit sessions of owner ("*": all) after the
// cursor, newest first. keep (nil: every session) filters what the page
// holds; then at most listScanBudget rows are read for one page. A page
// also ends when its summaries reach listPageBytes.
func (s *Store) SessionsPage(ctx context.Context, owner string, after listCursor, limit int, keep func(SessionInfo) bool) (listPage, error) {
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	budget := limit
	if keep != nil {
		budget = listScanBudget
	}
	var where []string
	var args []any
	if owner != "*" {
		where, args = append(where, "owner = ?"), append(args, owner)
	}
	if after.id != "" {
		where = append(where, "(updated_ms < ? OR (updated_ms = ? AND id > ?))")
		args = append(args, after.updated, after.updated, after.id)
	}
	q := `SELECT id, info, owner, prompt, last_seq, updated_ms FROM sessions`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY updated_ms DESC, id LIMIT ?"
	args = append(args, budget+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return listPage{}, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var page listPage
	var last listCursor
	bytes, scanned, more := 0, 0, false
	for rows.Next() {
		if scanned == budget || len(page.sessions) == limit || (len(page.sessions) > 0 && bytes >= listPageBytes) {
			more = true // a row beyond what this page reads
			break
		}
		var si SessionInfo
		if err := rows.Scan(&si.ID, (*[]byte)(&si.Info), &si.Owner, &si.Prompt, &si.LastSeq, &si.UpdatedMS); err != nil {
			return listPage{}, fmt.Errorf("list sessions: %w", err)
		}
		scanned++
		last = listCursor{updated: si.UpdatedMS, id: si.ID}
		if keep == nil || keep(si) {
			page.sessions = append(page.sessions, si)
			bytes += len(si.Info) + len(si.Prompt) + 96
		}
	}
	if err := rows.Err(); err != nil {
		return listPage{}, fmt.Errorf("list sessions: %w", err)
	}
	if more {
		page.next = last.String()
	}
	return page, nil
}

// Machines lists the owner's machines (sessions a daemon announces with
// mode "machine"), whatever page they would be on: the app offers to
// start sessions on them from the first page.
func (s *Store) Machines(ctx context.Context, owner string) ([]SessionInfo, error) {
	q, args := `SELECT id, info, owner, prompt, last_seq, updated_ms FROM sessions WHERE owner = ? AND `+machinesWhere+` ORDER BY updated_ms DESC, id`, []any{owner}
	if owner == "*" {
		q, args = `SELECT id, info, owner, prompt, last_seq, updated_ms FROM sessions WHERE `+machinesWhere+` ORDER BY updated_ms DESC, id`, nil
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list machines: %w", err)
	}
	defer rows.Close()
	var out []SessionInfo
	for rows.Next() {
		var si SessionInfo
		if err := rows.Scan(&si.ID, (*[]byte)(&si.Info), &si.Owner, &si.Prompt, &si.LastSeq, &si.UpdatedMS); err != nil {
			return nil, fmt.Errorf("list machines: %w", err)
		}
		if infoMode(si.Info) == "machine" {
			out = append(out, si)
		}
	}
	return out, rows.Err()
}

// listInfo is what the relay reads of a summary to filter on.
type listInfo struct {
	Mode        string            `json:"mode"`
	Status      string            `json:"status"`
	Machine     string            `json:"machine"`
	Cwd         string            `json:"cwd"`
	Title       string            `json:"title"`
	Sealed      json.RawMessage   `json:"sealed"`
	Permissions []json.RawMessage `json:"permissions"`
}

func infoMode(info json.RawMessage) string {
	var li listInfo
	if json.Unmarshal(info, &li) != nil {
		return ""
	}
	return li.Mode
}

var errBadFilter = errors.New("bad list filter")

// listKeep is the relay's side of the app's list filter (the app's
// listfilter.js matches): state, machine, folder and words in the title,
// first prompt, folder or machine. A sealed session's title and prompt are
// sealed: the relay cannot judge it and keeps it, for the app to judge
// once opened. Machines are not in the list's rows (Machines brings them).
func listKeep(f *protocol.ListFilter) (func(SessionInfo) bool, error) {
	if f == nil {
		return nil, nil
	}
	if len(f.Query) > 4*protocol.MaxListQuery {
		return nil, fmt.Errorf("%w: query of %d bytes", errBadFilter, len(f.Query))
	}
	if len(f.Machine) > protocol.MaxListFilterField || len(f.Folder) > protocol.MaxListFilterField {
		return nil, fmt.Errorf("%w: machine or folder of over %d bytes", errBadFilter, protocol.MaxListFilterField)
	}
	switch f.State {
	case "", "waiting", "working", "finished":
	default:
		return nil, fmt.Errorf("%w: state %.40q", errBadFilter, f.State)
	}
	words := strings.Fields(strings.ToLower(f.Query))
	if len(words) == 0 && f.State == "" && f.Machine == "" && f.Folder == "" {
		return nil, nil
	}
	return func(si SessionInfo) bool {
		var li listInfo
		if json.Unmarshal(si.Info, &li) != nil {
			return true // the app says what it cannot read
		}
		if li.Mode == "machine" {
			return false
		}
		if len(li.Sealed) > 0 {
			return true
		}
		if f.State != "" && listState(li) != f.State {
			return false
		}
		if f.Machine != "" && li.Machine != f.Machine {
			return false
		}
		if f.Folder != "" && li.Cwd != f.Folder {
			return false
		}
		if len(words) == 0 {
			return true
		}
		hay := strings.ToLower(strings.Join([]string{li.Title, si.Prompt, li.Cwd, shortPath(li.Cwd), li.Machine}, "\n"))
		for _, w := range words {
			if !strings.Contains(hay, w) {
				return false
			}
		}
		return true
	}, nil
}

// listState is the app's sessionState: waiting, working or finished.
func listState(li listInfo) string {
	switch {
	case li.Status == "waiting-for-permission" || len(li.Permissions) > 0:
		return "waiting"
	case li.Status == "busy":
		return "working"
	}
	return "finished"
}

// homeDirs are the patterns of shortPath, compiled when first used (not at
// every start of every ccrelay command).
var homeDirs = sync.OnceValues(func() (home, root *regexp.Regexp) {
	return regexp.MustCompile(`^/(home|Users)/[^/]+`), regexp.MustCompile(`^/root(/|$)`)
})

// shortPath is the app's shortPath (format.js): a home folder as ~.
func shortPath(p string) string {
	homeDir, rootDir := homeDirs()
	p = homeDir.ReplaceAllLiteralString(p, "~")
	return rootDir.ReplaceAllString(p, "~$1")
}

var errBadList = errors.New("bad list")

// listFrame answers a FrameList: every session (no Limit, as apps before
// paging ask), or one page; the first page also holds the owner's
// machines, wherever they are in the list.
func (s *Server) listFrame(ctx context.Context, f protocol.Frame) ([]byte, error) {
	owner := ownerFrom(ctx)
	if f.Limit == 0 && f.Cursor == "" && f.Filter == nil {
		all, err := s.store.SessionsOf(ctx, owner)
		if err != nil {
			return nil, err
		}
		return sessionsFrame(all), nil
	}
	if len(f.Ref) > 64 {
		return nil, fmt.Errorf("%w: ref of %d bytes", errBadList, len(f.Ref))
	}
	if f.Limit < 0 || f.Limit > MaxListLimit {
		return nil, fmt.Errorf("%w: limit %d is not in 1…%d", errBadList, f.Limit, MaxListLimit)
	}
	if f.Filter != nil && f.Filter.Session != "" {
		return s.listOne(ctx, f)
	}
	after, err := parseListCursor(f.Cursor)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadList, err)
	}
	keep, err := listKeep(f.Filter)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadList, err)
	}
	page, err := s.store.SessionsPage(ctx, owner, after, f.Limit, keep)
	if err != nil {
		return nil, err
	}
	if f.Cursor == "" {
		machines, err := s.store.Machines(ctx, owner)
		if err != nil {
			return nil, err
		}
		for _, m := range machines {
			if !slices.ContainsFunc(page.sessions, func(si SessionInfo) bool { return si.ID == m.ID }) {
				page.sessions = append(page.sessions, m)
			}
		}
	}
	return sessionsPageFrame(page.sessions, f.Ref, f.Cursor, page.next, true), nil
}

// listOne answers a list of one session (Filter.Session): it alone if it
// is the token's, else nothing.
func (s *Server) listOne(ctx context.Context, f protocol.Frame) ([]byte, error) {
	if err := checkSession(f.Filter.Session); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadList, err)
	}
	var one []SessionInfo
	si, err := s.store.session(ctx, f.Filter.Session)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, err
	case s.mine(ctx, si.ID) == nil:
		one = append(one, si)
	}
	return sessionsPageFrame(one, f.Ref, f.Cursor, "", true), nil
}
