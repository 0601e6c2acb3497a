package apiclient

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// fullDisk is a log file whose writes fail with ENOSPC once room bytes
// were written (room < 0: no limit), and whose Sync fails with syncErr
// when set: a file system that runs out of space.
type fullDisk struct {
	*os.File
	mu      sync.Mutex
	room    int64
	syncErr error
}

func (f *fullDisk) take(n int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.room < 0 || int64(n) <= f.room {
		if f.room >= 0 {
			f.room -= int64(n)
		}
		return n, nil
	}
	k := int(f.room)
	f.room = 0
	return k, syscall.ENOSPC
}

func (f *fullDisk) Write(p []byte) (int, error) {
	n, full := f.take(len(p))
	w, err := f.File.Write(p[:n])
	if err != nil {
		return w, err
	}
	return w, full
}

func (f *fullDisk) WriteAt(p []byte, off int64) (int, error) {
	n, full := f.take(len(p))
	w, err := f.File.WriteAt(p[:n], off)
	if err != nil {
		return w, err
	}
	return w, full
}

func (f *fullDisk) Sync() error {
	f.mu.Lock()
	err := f.syncErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *fullDisk) set(room int64, syncErr error) {
	f.mu.Lock()
	f.room, f.syncErr = room, syncErr
	f.mu.Unlock()
}

// openFull opens an outbox in dir whose log is a fullDisk.
func openFull(t *testing.T, dir string, log *slog.Logger) (*Outbox, *fullDisk) {
	t.Helper()
	var disk *fullDisk
	box, err := OpenOutboxWith(dir, OutboxOptions{Logger: log, OpenLog: func(path string) (LogFile, error) {
		f, err := openLogFile(path)
		if err != nil {
			return nil, err
		}
		disk = &fullDisk{File: f.(*os.File), room: -1}
		return disk, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return box, disk
}

func logSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// drain reads every batch the outbox would send, acknowledging each, and
// returns the ids in order.
func drain(t *testing.T, box *Outbox) []string {
	t.Helper()
	var ids []string
	for {
		b, err := box.next(64, MaxBatchBytes)
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			return ids
		}
		ids = append(ids, b.ids...)
		if err := box.ack(b.end); err != nil {
			t.Fatal(err)
		}
	}
}

// A write that fails part-way (the disk is full) or whose fsync fails
// leaves the outbox exactly as before it and returns the error; once
// space returns the same envelopes are appended again and every envelope
// reaches the relay once, in order, also after a reopen.
func TestOutboxFullDisk(t *testing.T) {
	eio := errors.New("input/output error")
	for _, tc := range []struct {
		name    string
		room    int64 // bytes the disk takes of the failing append
		syncErr error
		want    error
	}{
		{"nothing written", 0, nil, syscall.ENOSPC},
		{"part of the first line", 17, nil, syscall.ENOSPC},
		{"several lines and a part", 1000, nil, syscall.ENOSPC},
		{"everything but the last byte", -2, nil, syscall.ENOSPC},
		{"written, fsync fails", -1, eio, eio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRelay(t)
			dir := t.TempDir()
			box, disk := openFull(t, dir, quiet)
			defer func() { box.Close() }()
			ctx := context.Background()
			all := envs(sessF, 0, 30)
			if err := box.Append(ctx, sessF, all[:10]); err != nil {
				t.Fatal(err)
			}
			before := logSize(t, dir)
			room := tc.room
			if room == -2 { // all but the last byte (its newline)
				scratch, _ := OpenOutbox(t.TempDir())
				scratch.Append(ctx, sessF, all[10:20])
				room = scratch.Pending() - 1
				scratch.Close()
			}
			disk.set(room, tc.syncErr)
			err := box.Append(ctx, sessF, all[10:20])
			if !errors.Is(err, tc.want) {
				t.Fatalf("Append on a full disk = %v, want %v", err, tc.want)
			}
			if got := logSize(t, dir); got != before {
				t.Fatalf("log is %d bytes after the failed write, was %d", got, before)
			}
			if box.Pending() != before {
				t.Fatalf("pending %d, log %d", box.Pending(), before)
			}
			// Space returns: the caller appends the same envelopes again.
			disk.set(-1, nil)
			if err := box.Append(ctx, sessF, all[10:20]); err != nil {
				t.Fatal(err)
			}
			if err := box.Append(ctx, sessF, all[20:]); err != nil {
				t.Fatal(err)
			}
			// What a restart would send is every envelope, once.
			box.Close()
			box, _ = openFull(t, dir, quiet)
			rc := runClient(Config{URL: "http://" + r.addr, Token: token, BatchSize: 7, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}, box)
			rc.finish(t)
			r.halt()
			checkStored(t, sessF, r.ids(sessF), all)
		})
	}
}

// logRecords collects log records for tests.
type logRecords struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecords) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logRecords) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logRecords) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// failureLogs is a log the test prints when it fails.
func failureLogs(t *testing.T) *logRecords {
	l := &logRecords{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(l.String())
		}
	})
	return l
}

// Every line the outbox cuts or skips is logged with its offset and why;
// an acknowledged offset that is not on a line boundary goes back to the
// line's start (the line is sent again) instead of cutting it.
func TestOutboxLogsSkippedLines(t *testing.T) {
	dir := t.TempDir()
	box, err := OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all := envs("L", 0, 4)
	box.Append(ctx, "L", all[:2])
	garbageAt := box.Pending()
	box.appendRaw([]byte("not json\n"))
	box.Append(ctx, "L", all[2:])
	size := box.Pending()
	box.Close()
	f, _ := os.OpenFile(filepath.Join(dir, logName), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"s":"L","i":"torn","e":{"id":`)
	f.Close()

	var logs logRecords
	box, err = OpenOutboxWith(dir, OutboxOptions{Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, box); strings.Join(got, " ") != strings.Join(ids(all), " ") {
		t.Fatalf("sent %v, want %v", got, ids(all))
	}
	box.Close()
	out := logs.String()
	for _, want := range []string{
		"offset=" + strconv.FormatInt(size, 10), "torn",
		"offset=" + strconv.FormatInt(garbageAt, 10), "unreadable",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}

	// An acknowledged offset in the middle of a line (a damaged or stale
	// offset file) goes back to the start of that line.
	os.Remove(filepath.Join(dir, logName))
	os.Remove(filepath.Join(dir, ackedName))
	box, _ = OpenOutbox(dir)
	box.Append(ctx, "L", all[:1])
	first := box.Pending()
	box.Append(ctx, "L", all[1:])
	box.Close()
	os.WriteFile(filepath.Join(dir, ackedName), []byte(strconv.FormatInt(first+5, 10)), 0o600)
	logs = logRecords{}
	box, _ = OpenOutboxWith(dir, OutboxOptions{Logger: logs.logger()})
	defer box.Close()
	if got := drain(t, box); strings.Join(got, " ") != strings.Join(ids(all[1:]), " ") {
		t.Fatalf("after a mid-line offset sent %v, want %v", got, ids(all[1:]))
	}
	if !strings.Contains(logs.String(), "line boundary") {
		t.Errorf("mid-line offset not logged:\n%s", logs.String())
	}
}

// A compaction stopped after the log was replaced (a crash before the new
// acknowledged offset was written) loses nothing and sends nothing twice:
// a later run that appends and dies before any ack, then runs again,
// sends every envelope it appended once.
func TestOutboxCompactionCrash(t *testing.T) {
	dir := t.TempDir()
	box, err := OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	box.Append(ctx, "A", envs("A", 0, 10000)) // over compactAt
	crashed := errors.New("crash")
	box.stop = func(step string) error {
		if step == "compact-log-replaced" {
			return crashed
		}
		return nil
	}
	var sent []string
	for {
		b, _ := box.next(5000, MaxBatchBytes) // two acks: the first is written, the second compacts
		if b == nil {
			break
		}
		sent = append(sent, b.ids...)
		if err := box.ack(b.end); err != nil {
			if !errors.Is(err, crashed) {
				t.Fatal(err)
			}
			break
		}
	}
	if len(sent) != 10000 {
		t.Fatalf("sent %d before the crash", len(sent))
	}
	box.Close()
	if logSize(t, dir) > 1<<10 {
		t.Fatal("the crash was not at the compaction")
	}
	// The next run appends and dies before the relay acknowledged anything.
	box, err = OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	unsent := envs("B", 0, 10000) // a log longer than the stale offset

	box.Append(ctx, "B", unsent)
	box.Close()
	// The run after that sends them all, once.
	box, err = OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	got := drain(t, box)
	if strings.Join(got, " ") != strings.Join(ids(unsent), " ") {
		t.Fatalf("sent %d envelopes after the crash, want the %d unsent once", len(got), len(unsent))
	}
}

func ids(es []protocol.Envelope) []string {
	out := make([]string, len(es))
	for i := range es {
		out[i] = es[i].ID
	}
	return out
}
