package mapper

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// pngOf is a w×h PNG.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func imageBlock(mime string, data []byte) string {
	return fmt.Sprintf(`{"type":"image","source":{"type":"base64","media_type":%q,"data":%q}}`, mime, base64.StdEncoding.EncodeToString(data))
}

func TestPromptImagesBecomeFileEnvelopesWithBlobs(t *testing.T) {
	pic := pngOf(t, 3, 2)
	big := make([]byte, protocol.MaxBlobBytes+1)
	copy(big, pic)
	line := `{"type":"user","uuid":"u1","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":[` +
		`{"type":"text","text":"what is in this picture?"},` + imageBlock("image/png", pic) + `,` +
		imageBlock("image/jpeg", big) + `,` +
		imageBlock("application/x-sh", pic) + `,` +
		`{"type":"image","source":{"type":"url","url":"https://example.invalid/a.png"}},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"%%%"}}` +
		`]}}`
	m := New(testSession)
	envs := m.Map(rec(t, line))
	checkInvariants(t, envs)
	var files []protocol.Envelope
	for _, e := range envs {
		if e.Ev.T == protocol.KindFile {
			files = append(files, e)
		}
	}
	if len(files) != 2 {
		t.Fatalf("got %d file envelopes, want 2 (a PNG and a JPEG; not the unknown type, the URL or bad base64): %v", len(files), describeAll(envs))
	}
	f := files[0]
	if f.Role != protocol.RoleUser || f.Ev.Ref != f.ID || f.Ev.Name != "image-2.png" || f.Ev.MimeType != "image/png" ||
		*f.Ev.Size != int64(len(pic)) || f.Ev.Image == nil || f.Ev.Image.Width != 3 || f.Ev.Image.Height != 2 {
		t.Errorf("PNG file envelope = %+v, image %+v", f.Ev, f.Ev.Image)
	}
	if !bytes.Equal(f.Blob, pic) {
		t.Errorf("PNG blob is %d bytes, want the image's %d", len(f.Blob), len(pic))
	}
	if err := f.Validate(); err != nil {
		t.Error(err)
	}
	g := files[1]
	if *g.Ev.Size != int64(len(big)) || g.Blob != nil || g.Ev.Name != "image-3.jpg" {
		t.Errorf("an image over MaxBlobBytes: size %d, blob %d bytes, name %q; want its size, no blob", *g.Ev.Size, len(g.Blob), g.Ev.Name)
	}
	// The envelope's JSON never carries the blob.
	raw, err := f.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(pic)[:20])) || len(raw) > 400 {
		t.Errorf("the file envelope's JSON holds the image: %s", raw)
	}
}

func TestTruncatedResultKeepsFullTextAsBlob(t *testing.T) {
	for _, n := range []int{protocol.MaxResultBytes, protocol.MaxResultBytes + 1, protocol.MaxFullResultBytes + 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			text := strings.Repeat("é", n/2) + strings.Repeat("x", n%2)
			use := `{"type":"assistant","uuid":"a1","timestamp":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"cat big"}}]}}`
			res := fmt.Sprintf(`{"type":"user","uuid":"u2","timestamp":"2026-01-01T00:00:01Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":%q}]}}`, text)
			m := New(testSession)
			envs := append(m.Map(rec(t, use)), m.Map(rec(t, res))...)
			var end *protocol.Envelope
			for i := range envs {
				if envs[i].Ev.T == protocol.KindToolCallEnd {
					end = &envs[i]
				}
			}
			if end == nil {
				t.Fatal("no tool-call-end")
			}
			if err := end.Validate(); err != nil {
				t.Fatal(err)
			}
			switch {
			case len(text) <= protocol.MaxResultBytes:
				if end.Ev.Truncated || end.Ev.Full != 0 || end.Blob != nil {
					t.Errorf("a result within the preview: truncated %v, full %d, blob %d bytes", end.Ev.Truncated, end.Ev.Full, len(end.Blob))
				}
			case len(text) <= protocol.MaxFullResultBytes:
				if !end.Ev.Truncated || string(end.Blob) != text || end.Ev.Full != int64(len(text)) {
					t.Errorf("a cut result: truncated %v, full %d, blob %d bytes; want the whole %d-byte text", end.Ev.Truncated, end.Ev.Full, len(end.Blob), len(text))
				}
			default:
				if len(end.Blob) > protocol.MaxFullResultBytes || len(end.Blob) < protocol.MaxFullResultBytes-3 ||
					!strings.HasPrefix(text, string(end.Blob)) || end.Ev.Full != int64(len(end.Blob)) {
					t.Errorf("a result over MaxFullResultBytes: blob %d bytes, full %d", len(end.Blob), end.Ev.Full)
				}
			}
		})
	}
}
