// Package hooksettings adds a hook to Claude Code's user settings
// (settings.json) and takes it out again, without breaking them: the file
// is merged, not replaced (every other key kept, in its order), a file that
// is not valid JSON is refused untouched, a backup of the file as it was is
// written beside it, removing the hook gives back the file byte for byte
// when nothing else changed in it meanwhile, and a change another program
// (Claude Code) makes between the read and the write is merged with, not
// overwritten: the file is read again and the work done again.
package hooksettings

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ccrelay/ccrelay/internal/durable"
)

// BackupSuffix names the backup of the settings file (its name followed by
// this), written by Install: the file as it was before the hook went in.
const BackupSuffix = ".ccrelay-backup"

// maxFile bounds what is read of a settings file.
const maxFile = 16 << 20

// Ours recognises a hook of ours: one entry of a hook group's "hooks".
type Ours func(hook map[string]any) bool

// Result says what Install or Remove did.
type Result struct {
	// Changed: the settings file was written (or removed).
	Changed bool
	// Updated: Install replaced a hook of ours that differed (another
	// ccrelay's path, say).
	Updated bool
	// Backup is the backup's path when Install wrote it, or when Remove
	// left it (the file was not restored from it).
	Backup string
	// Restored: Remove gave back the file as it was before Install (or
	// removed it, when there was none).
	Restored bool
}

// Settings is a parsed settings file.
type Settings struct {
	root *object
	crlf bool
}

// Parse reads a settings file's content: a JSON object (an empty file is
// an empty one).
func Parse(b []byte) (*Settings, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return &Settings{root: newObject()}, nil
	}
	v, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON (%v)", err)
	}
	o, ok := v.(*object)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return &Settings{root: o, crlf: bytes.Contains(b, []byte("\r\n"))}, nil
}

// Bytes is the settings as Claude Code writes them: indented by two
// spaces, a newline at the end.
func (s *Settings) Bytes() ([]byte, error) {
	compact, err := marshal(s.root)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := indent(&buf, compact); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	b := buf.Bytes()
	if s.crlf {
		b = bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
	}
	return b, nil
}

// groups is the list of hook groups of event, checked.
func (s *Settings) groups(event string) ([]any, error) {
	hv, ok := s.root.vals["hooks"]
	if !ok || hv == nil {
		return nil, nil
	}
	hooks, ok := hv.(*object)
	if !ok {
		return nil, errors.New("hooks is not an object")
	}
	ev, ok := hooks.vals[event]
	if !ok || ev == nil {
		return nil, nil
	}
	list, ok := ev.([]any)
	if !ok {
		return nil, fmt.Errorf("hooks.%s is not a list", event)
	}
	return list, nil
}

// Count is how many hooks of ours event has.
func (s *Settings) Count(event string, ours Ours) int {
	list, _ := s.groups(event)
	n := 0
	for _, g := range list {
		for _, h := range groupHooks(g) {
			if isOurs(h, ours) {
				n++
			}
		}
	}
	return n
}

func groupHooks(g any) []any {
	o, ok := g.(*object)
	if !ok {
		return nil
	}
	hs, _ := o.vals["hooks"].([]any)
	return hs
}

func isOurs(h any, ours Ours) bool {
	o, ok := h.(*object)
	if !ok {
		return false
	}
	m := make(map[string]any, len(o.keys))
	for k, v := range o.vals {
		m[k] = v
	}
	return ours(m)
}

// without takes every hook of ours out of event: a group left with no
// hook goes, then the event's list if it is left empty, then hooks if it
// is left empty. It reports whether anything was taken out.
func (s *Settings) without(event string, ours Ours) (bool, error) {
	list, err := s.groups(event)
	if err != nil || list == nil {
		return false, err
	}
	removed := false
	var kept []any
	for _, g := range list {
		hs := groupHooks(g)
		var keep []any
		for _, h := range hs {
			if isOurs(h, ours) {
				removed = true
				continue
			}
			keep = append(keep, h)
		}
		if len(keep) == len(hs) {
			kept = append(kept, g)
			continue
		}
		if len(keep) > 0 {
			g.(*object).set("hooks", keep)
			kept = append(kept, g)
		}
	}
	if !removed {
		return false, nil
	}
	s.tidy(event, kept)
	return true, nil
}

// tidy sets event's groups to list, removing the list and then hooks when
// they are empty.
func (s *Settings) tidy(event string, list []any) {
	hooks := s.root.vals["hooks"].(*object)
	if len(list) > 0 {
		hooks.set(event, list)
		return
	}
	hooks.del(event)
	if len(hooks.keys) == 0 {
		s.root.del("hooks")
	}
}

// normal is s with event's empty list and an empty hooks object removed:
// what without leaves; two settings equal in it differ by nothing Claude
// Code reads.
func (s *Settings) normal(event string) ([]byte, error) {
	c, err := Parse(mustMarshal(s.root))
	if err != nil {
		return nil, err
	}
	if list, err := c.groups(event); err == nil && c.root.vals["hooks"] != nil {
		c.tidy(event, list)
	}
	return marshal(c.root)
}

func mustMarshal(o *object) []byte {
	b, _ := marshal(o)
	return b
}

// file is a settings file as read: its content and mode, and the path
// that is written (a symbolic link's target, so the link stays).
type file struct {
	path, real string
	data       []byte
	exists     bool
	mode       fs.FileMode
}

func readFile(path string) (*file, error) {
	f := &file{path: path, real: path, mode: 0o600}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		f.real = real
	}
	fi, err := os.Stat(f.real)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Claude Code's settings: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("Claude Code's settings %s is not a file", path)
	}
	if fi.Size() > maxFile {
		return nil, fmt.Errorf("Claude Code's settings %s is larger than %d bytes: not changed", path, maxFile)
	}
	if f.data, err = os.ReadFile(f.real); err != nil {
		return nil, fmt.Errorf("read Claude Code's settings: %w", err)
	}
	f.exists, f.mode = true, fi.Mode().Perm()
	return f, nil
}

func (f *file) parse() (*Settings, error) {
	s, err := Parse(f.data)
	if err != nil {
		return nil, fmt.Errorf("Claude Code's settings %s is %v: fix it (Claude Code cannot read it either) and run this again; nothing was changed", f.path, err)
	}
	return s, nil
}

// beforeWrite, when set (tests), runs between reading the settings and
// writing them: where another program may write them meanwhile.
var beforeWrite func()

// errChanged: the settings file is no longer what was read.
var errChanged = errors.New("changed meanwhile")

// unchanged checks, just before a write, that the file is still what was
// read: Claude Code writes its settings too, and a change it made since
// must be merged with, not overwritten.
func (f *file) unchanged() error {
	if beforeWrite != nil {
		beforeWrite()
	}
	b, err := os.ReadFile(f.real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !f.exists {
			return nil
		}
	case err != nil:
		return fmt.Errorf("read Claude Code's settings: %w", err)
	case f.exists && bytes.Equal(b, f.data):
		return nil
	}
	return errChanged
}

// attempts bounds how often Install and Remove start again when the file
// changed between their read and their write.
const attempts = 5

func retry(path string, op func() (Result, error)) (Result, error) {
	for range attempts {
		res, err := op()
		if !errors.Is(err, errChanged) {
			return res, err
		}
	}
	return Result{}, fmt.Errorf("Claude Code's settings %s changed each time ccrelay was about to write them: nothing was changed; run this again", path)
}

func (f *file) write(b []byte) error {
	if err := f.unchanged(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.real), 0o700); err != nil {
		return fmt.Errorf("write Claude Code's settings: %w", err)
	}
	if err := durable.WriteFile(f.real, b, f.mode); err != nil {
		return fmt.Errorf("write Claude Code's settings: %w", err)
	}
	return nil
}

// Install adds hook as a hook of event in the settings file at path (made
// when there is none), after the hooks the file has, in a group of its own
// that matches every source ("*"). A hook of ours already there is replaced
// (in its place), or left as it is when it is the same. The file as it was
// is kept in path+BackupSuffix first, unless it already held a hook of ours
// (then the backup of that install stays). A file that is not a JSON object,
// or whose hooks are not as Claude Code reads them, is refused untouched.
func Install(path, event string, hook map[string]any, ours Ours) (Result, error) {
	return retry(path, func() (Result, error) { return install(path, event, hook, ours) })
}

func install(path, event string, hook map[string]any, ours Ours) (Result, error) {
	f, err := readFile(path)
	if err != nil {
		return Result{}, err
	}
	s, err := f.parse()
	if err != nil {
		return Result{}, err
	}
	list, err := s.groups(event)
	if err != nil {
		return Result{}, fmt.Errorf("Claude Code's settings %s: %v, which Claude Code does not read: fix it and run this again; nothing was changed", path, err)
	}
	fresh := s.Count(event, ours) == 0
	if fresh {
		if f.exists {
			if err := durable.WriteFile(path+BackupSuffix, f.data, f.mode); err != nil {
				return Result{}, fmt.Errorf("back up Claude Code's settings: %w", err)
			}
		}
		group := newObject()
		group.set("matcher", "*")
		group.set("hooks", []any{hook})
		hooks, _ := s.root.vals["hooks"].(*object)
		if hooks == nil {
			hooks = newObject()
			s.root.set("hooks", hooks)
		}
		hooks.set(event, append(list, group))
	} else {
		// Each hook of ours becomes hook (the same, when installed by
		// this ccrelay from the same place).
		for _, g := range list {
			hs := groupHooks(g)
			for i, h := range hs {
				if isOurs(h, ours) {
					hs[i] = hook
				}
			}
		}
	}
	b, err := s.Bytes()
	if err != nil {
		return Result{}, err
	}
	if !fresh {
		// Compare what Claude Code reads: the same hook written in
		// another layout is no change.
		old, _ := f.parse()
		ob, _ := marshal(old.root)
		nb, _ := marshal(s.root)
		if bytes.Equal(ob, nb) {
			return Result{}, nil
		}
	}
	if err := f.write(b); err != nil {
		return Result{}, err
	}
	res := Result{Changed: true, Updated: !fresh}
	if fresh && f.exists {
		res.Backup = path + BackupSuffix
	}
	return res, nil
}

// Remove takes every hook of ours out of event in the settings file at
// path. When the file is then what its backup holds (nothing else changed
// since Install), the backup's bytes are written back exactly and the
// backup removed; with no backup and nothing left, the file is removed (it
// was made by Install). Otherwise only the hooks of ours go, and the
// backup stays. A file with no hook of ours is not touched.
func Remove(path, event string, ours Ours) (Result, error) {
	return retry(path, func() (Result, error) { return remove(path, event, ours) })
}

func remove(path, event string, ours Ours) (Result, error) {
	f, err := readFile(path)
	if err != nil {
		return Result{}, err
	}
	if !f.exists {
		return Result{}, nil
	}
	s, err := f.parse()
	if err != nil {
		return Result{}, err
	}
	removed, err := s.without(event, ours)
	if err != nil {
		return Result{}, fmt.Errorf("Claude Code's settings %s: %v: nothing was changed", path, err)
	}
	if !removed {
		return Result{}, nil
	}
	backupPath := path + BackupSuffix
	backup, berr := os.ReadFile(backupPath)
	switch {
	case berr == nil:
		if bs, err := Parse(backup); err == nil && equal(bs, s, event) {
			if err := f.write(backup); err != nil {
				return Result{}, err
			}
			if err := os.Remove(backupPath); err != nil {
				return Result{Changed: true, Restored: true}, fmt.Errorf("remove the backup of Claude Code's settings: %w", err)
			}
			return Result{Changed: true, Restored: true}, nil
		}
	case errors.Is(berr, fs.ErrNotExist):
		if len(s.root.keys) == 0 {
			if err := f.unchanged(); err != nil {
				return Result{}, err
			}
			if err := os.Remove(f.real); err != nil {
				return Result{}, fmt.Errorf("remove Claude Code's settings made for the hook: %w", err)
			}
			return Result{Changed: true, Restored: true}, nil
		}
		backupPath = ""
	default:
		return Result{}, fmt.Errorf("read the backup of Claude Code's settings: %w", berr)
	}
	b, err := s.Bytes()
	if err != nil {
		return Result{}, err
	}
	if err := f.write(b); err != nil {
		return Result{}, err
	}
	return Result{Changed: true, Backup: backupPath}, nil
}

// equal reports whether a and b hold the same settings, but for an empty
// list of event's hooks or an empty hooks object.
func equal(a, b *Settings, event string) bool {
	na, err1 := a.normal(event)
	nb, err2 := b.normal(event)
	return err1 == nil && err2 == nil && bytes.Equal(na, nb)
}
