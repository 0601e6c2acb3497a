package launcher

import (
	"context"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// readConsoleInput is ReadConsoleInputW, which x/sys/windows does not wrap.
// Unlike ReadFile it takes every kind of console event (focus, mouse,
// resize) without blocking for a key that may never come.
var readConsoleInput = windows.NewLazySystemDLL("kernel32.dll").NewProc("ReadConsoleInputW")

// inputRecord is the console's INPUT_RECORD with its KEY_EVENT_RECORD
// laid out (the other events are not read).
type inputRecord struct {
	eventType uint16
	_         uint16
	keyDown   int32
	repeat    uint16
	vkey      uint16
	scan      uint16
	char      uint16
	control   uint32
}

// readKeys hands the characters typed on the console f to fn until fn
// returns false, ctx ends, or the console goes away. It waits on the input
// handle keyPoll at a time and takes the console's input events, keeping
// the characters of key presses.
func readKeys(ctx context.Context, f *os.File, fn func([]byte) bool) {
	h := windows.Handle(f.Fd())
	var recs [16]inputRecord
	for ctx.Err() == nil {
		ev, err := windows.WaitForSingleObject(h, keyPoll)
		if err != nil || ev == windows.WAIT_FAILED {
			return
		}
		if ev != windows.WAIT_OBJECT_0 {
			continue
		}
		var n uint32
		r, _, _ := readConsoleInput.Call(uintptr(h), uintptr(unsafe.Pointer(&recs[0])), uintptr(len(recs)), uintptr(unsafe.Pointer(&n)))
		if r == 0 {
			return
		}
		var keys []byte
		for _, rec := range recs[:n] {
			if rec.eventType == windows.KEY_EVENT && rec.keyDown != 0 && rec.char != 0 && rec.char < 0x80 {
				for range max(rec.repeat, 1) {
					keys = append(keys, byte(rec.char))
				}
			}
		}
		if len(keys) > 0 && !fn(keys) {
			return
		}
	}
}
