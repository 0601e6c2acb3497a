package mapper

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig reads the size of GIF prompts' images
	_ "image/jpeg"
	_ "image/png"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// imageTypes are the image types a prompt may carry that the relay keeps
// and the app shows; they are the ones Claude's API takes.
var imageTypes = map[string]string{
	"image/png":  "png",
	"image/jpeg": "jpg",
	"image/gif":  "gif",
	"image/webp": "webp",
}

// image maps an image block of a prompt to a file envelope. Its ref is the
// envelope's own id: the relay keeps the image's bytes (the envelope's
// blob) under it, unless they are over protocol.MaxBlobBytes, when the
// envelope says only what the image was.
func (m *Mapper) image(r *claude.Record, src string, i int, b *claude.Block) {
	s := b.Source
	if s == nil || s.Type != "base64" {
		return // a URL source: nothing of it is in the transcript
	}
	ext, ok := imageTypes[s.MediaType]
	if !ok {
		return
	}
	data, err := base64.StdEncoding.DecodeString(s.Data)
	if err != nil || len(data) == 0 {
		return
	}
	id := blockID(m.session, src, i, "file")
	size := int64(len(data))
	ev := protocol.Event{T: protocol.KindFile, Ref: id, Name: fmt.Sprintf("image-%d.%s", i+1, ext),
		Size: &size, MimeType: s.MediaType}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil && cfg.Width > 0 && cfg.Height > 0 {
		ev.Image = &protocol.Image{Width: int64(cfg.Width), Height: int64(cfg.Height)}
	}
	m.emitOwn(protocol.RoleUser, id, nil, r.UUID, ev)
	if len(data) <= protocol.MaxBlobBytes {
		m.out[len(m.out)-1].Blob = data
	}
}
