package launcher

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
)

// MaxRunSlots bounds how many ccrelay processes can run at once in one
// working directory with one state folder: each holds a slot of its own.
const MaxRunSlots = 64

// runSlotPrefix names the slots after the first: <base>/run-<n>.
const runSlotPrefix = "run-"

// lockName is the file a slot's owner holds an exclusive flock on.
const lockName = "lock"

// RunDir is a slot of a project's state folder that one ccrelay process
// holds for as long as it runs: its cursor, outbox and hook folder live
// there, apart from those of any other ccrelay running in the same folder
// with the same state. The slot is held by an exclusive flock, which the
// kernel releases when the process dies, however it dies.
type RunDir struct {
	Path string
	// StaleHookDirs is how many hook folders of earlier owners of the
	// slot the claim removed (see removeStaleHookDirs), and StaleErr why
	// some could not be: neither stops the run.
	StaleHookDirs int
	StaleErr      error
	slot          int
	base          string
	lock          *os.File
}

// ClaimRunDir takes the first slot of base that no running process holds:
// base itself (slot 0: what a single ccrelay always uses), else
// base/run-1, base/run-2, … up to MaxRunSlots.
func ClaimRunDir(base string) (*RunDir, error) {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("create state folder: %w", err)
	}
	for i := range MaxRunSlots {
		dir := slotPath(base, i)
		lock, err := tryLockSlot(dir, true)
		if err != nil {
			return nil, err
		}
		if lock != nil {
			r := &RunDir{Path: dir, slot: i, base: base, lock: lock}
			r.StaleHookDirs, r.StaleErr = removeStaleHookDirs(dir)
			return r, nil
		}
	}
	return nil, fmt.Errorf("%d ccrelay processes already run in this folder with state %s: no slot left", MaxRunSlots, base)
}

// removeStaleHookDirs removes the hook folders in a slot whose lock the
// caller has just taken: an earlier owner killed before its cleanup (a
// SIGKILL, a crash, a power cut) left them. The lock is the proof that
// their owner is gone: the kernel dropped it when the process died, and
// no one else writes into a slot it does not hold. A recorded pid would
// prove nothing (pids are reused); the lock cannot be inherited either
// (it is opened close-on-exec, so Claude and its hooks never hold it).
func removeStaleHookDirs(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list the state folder for stale hook folders: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), hookDirPrefix) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove a stale hook folder: %w", err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func slotPath(base string, i int) string {
	if i == 0 {
		return base
	}
	return filepath.Join(base, runSlotPrefix+strconv.Itoa(i))
}

// tryLockSlot takes the slot's lock without waiting: nil, nil when another
// process holds it (or, with create false, when the slot is gone).
func tryLockSlot(dir string, create bool) (*os.File, error) {
	for {
		if create {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("create state folder: %w", err)
			}
		}
		path := filepath.Join(dir, lockName)
		flags := os.O_RDWR
		if create {
			flags |= os.O_CREATE
		}
		f, err := os.OpenFile(path, flags, 0o600)
		if errors.Is(err, os.ErrNotExist) {
			if !create {
				return nil, nil
			}
			// Another ccrelay removed the slot (it held no lock yet)
			// between the mkdir and the open: make it again.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lock state folder: %w", err)
		}
		if err := lockFile(f, false); err != nil {
			f.Close()
			if errors.Is(err, errLocked) {
				return nil, nil
			}
			return nil, fmt.Errorf("lock state folder %s: %w", dir, err)
		}
		// The slot may have been removed (and made again) between the
		// open and the lock: a lock on a file no longer at path holds
		// nothing. Try again on the file that is there.
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fi, pi) {
			return f, nil
		}
		f.Close()
		if !create && errors.Is(err2, os.ErrNotExist) {
			return nil, nil
		}
	}
}

// Release lets another process take the slot.
func (r *RunDir) Release() error {
	if r.lock == nil {
		return nil
	}
	err := r.lock.Close() // closing the last descriptor drops the flock
	r.lock = nil
	return err
}

// Leftovers hands each slot after the first that no process holds (what a
// ccrelay that ended left: an outbox that may hold unsent envelopes, a
// cursor) to take, holding its lock, and removes the slot when take
// succeeds. Slot 0 is never removed: the next ccrelay alone in the folder
// uses it again. It returns how many slots were taken over.
func (r *RunDir) Leftovers(take func(dir string) error) (int, error) {
	ents, err := os.ReadDir(r.base)
	if err != nil {
		return 0, fmt.Errorf("list state folder: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range ents {
		num, ok := strings.CutPrefix(e.Name(), runSlotPrefix)
		i, err := strconv.Atoi(num)
		if !ok || !e.IsDir() || err != nil || i <= 0 || i == r.slot {
			continue
		}
		dir := filepath.Join(r.base, e.Name())
		lock, err := tryLockSlot(dir, false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if lock == nil {
			continue // a running ccrelay holds it
		}
		if err := take(dir); err != nil {
			errs = append(errs, fmt.Errorf("take over %s: %w", dir, err))
		} else if err := removeSlot(r.base, dir); err != nil {
			errs = append(errs, err)
		} else {
			n++
		}
		lock.Close()
	}
	// What a removal cut short (a crash) is no one's.
	gone, _ := filepath.Glob(filepath.Join(r.base, removedPrefix+"*"))
	for _, g := range gone {
		os.RemoveAll(g)
	}
	return n, errors.Join(errs...)
}

// removedPrefix names a slot on its way out.
const removedPrefix = ".removed-"

// removeSlot removes a slot whose lock the caller holds. It is first
// renamed out of the way, in one step: another ccrelay claiming the slot
// meanwhile makes a fresh one at the slot's path and never writes into
// the folder being removed.
func removeSlot(base, dir string) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	gone := filepath.Join(base, removedPrefix+filepath.Base(dir)+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Rename(dir, gone); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	crashpoint.Hit(crashpoint.SlotRenamed)
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
