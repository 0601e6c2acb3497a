// Frames on a websocket: reading them within the size limits, writing
// them, and the errors said about them.

package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

func writeFrame(ctx context.Context, c *websocket.Conn, f protocol.Frame) error {
	f.V = protocol.FrameVersion
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return writeRaw(ctx, c, b)
}

// readFrame reads one message, holding at most MaxFrameBytes+1 of it:
// the rest of a larger one is read and thrown away (as far as the
// connection's read limit lets), and size says how large it was.
func readFrame(ctx context.Context, c *websocket.Conn) (data []byte, size int64, err error) {
	_, r, err := c.Reader(ctx)
	if err != nil {
		return nil, 0, err
	}
	data, err = io.ReadAll(io.LimitReader(r, MaxFrameBytes+1))
	if err != nil {
		return nil, 0, err
	}
	size = int64(len(data))
	if size > MaxFrameBytes {
		n, err := io.Copy(io.Discard, r)
		if err != nil {
			return nil, 0, err
		}
		size += n
	}
	return data, size, nil
}

// refuseTooLarge answers a frame over MaxFrameBytes with the error code
// its type uses for a frame refused for what it is, and its ref, both read
// from the frame's head.
func refuseTooLarge(data []byte, size int64) *protocol.Frame {
	typ, ref := frameHead(data[:min(len(data), 4096)])
	e := errorFrame(refusalCode(typ), "the frame is %d bytes, more than the relay's limit of %d (relay.MaxFrameBytes); nothing of it was stored or forwarded", size, MaxFrameBytes)
	e.Ref = ref
	return &e
}

// frameHead reads the type and ref from the start of a frame's JSON (they
// come before its envelopes when a CLI encodes a protocol.Frame).
func frameHead(head []byte) (typ, ref string) {
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return "", ""
	}
	for typ == "" || ref == "" {
		k, err := d.Token()
		if err != nil {
			return typ, ref
		}
		key, _ := k.(string)
		v, err := d.Token()
		if err != nil {
			return typ, ref
		}
		if _, ok := v.(json.Delim); ok {
			return typ, ref // an array or object: the short fields are behind
		}
		switch s, _ := v.(string); key {
		case "type":
			typ = s
		case "ref":
			ref = s
		}
	}
	return typ, ref
}

func errorFrame(code, format string, args ...any) protocol.Frame {
	return protocol.Frame{Type: protocol.FrameError, Code: code, Message: fmt.Sprintf(format, args...)}
}

// quickFrameBytes: frames from this size on (batches) are first decoded
// in one pass (protocol.QuickFrame); smaller ones (an app's) as they were.
const quickFrameBytes = 512

// decodeFrame decodes a frame: a batch from a CLI in one pass, any other
// frame in full. It is a function of its own so that its temporaries are
// not in the frame of readFrames, which stays on the stack of every idle
// connection while it waits (a few hundred bytes more there kept the
// stacks of idle apps from shrinking: 34 KB each instead of 18).
//
//go:noinline
func decodeFrame(data []byte) (*protocol.Frame, []string, error) {
	f := new(protocol.Frame)
	if len(data) >= quickFrameBytes {
		if q, ids, ok := protocol.QuickBatch(data); ok {
			*f = q
			return f, ids, nil
		}
	}
	if err := json.Unmarshal(data, f); err != nil {
		return nil, nil, err
	}
	return f, nil, nil
}

// readFrames calls handle for every frame read from c until the connection
// ends, with what QuickCheck says of each of its envelopes when the frame
// was decoded in one pass (checkBatch's ids; nil otherwise). A malformed
// frame gets an error frame and reading goes on.
func (s *Server) readFrames(ctx context.Context, c *websocket.Conn, handle func(f protocol.Frame, ids []string) error) error {
	for {
		data, size, err := readFrame(ctx, c)
		if err != nil {
			return err
		}
		if err := handleFrame(ctx, c, data, size, handle); err != nil {
			return err
		}
	}
}

// handleFrame decodes and checks a frame read, and hands it to handle or
// answers why not. It is a function of its own, as decodeFrame is, so that
// the frames it decodes are not in the frame of readFrames, which stays on
// the stack of every idle connection while it waits.
//
//go:noinline
func handleFrame(ctx context.Context, c *websocket.Conn, data []byte, size int64, handle func(f protocol.Frame, ids []string) error) error {
	if size > MaxFrameBytes {
		return writeFrame(ctx, c, *refuseTooLarge(data, size))
	}
	fp, ids, err := decodeFrame(data)
	if err != nil {
		return writeFrame(ctx, c, errorFrame("bad-frame", "not a JSON frame: %v", err))
	}
	f := *fp
	if e := refuseInvalidUTF8(f, data); e != nil {
		return writeFrame(ctx, c, *e)
	}
	if f.V != protocol.FrameVersion {
		return writeFrame(ctx, c, errorFrame("bad-version", "frame version %d, this relay speaks %d", f.V, protocol.FrameVersion))
	}
	return handle(f, ids)
}
