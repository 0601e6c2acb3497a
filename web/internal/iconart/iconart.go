// Package iconart draws the app's icon (the mark of web/static/icon.svg: a
// prompt chevron and a cursor on the accent colour) as PNG at any size, for
// the home screens that want bitmaps. `go generate ./web` writes the files;
// a test checks the checked-in ones are what it draws.
package iconart

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
)

// Icon is one PNG the app ships.
type Icon struct {
	Name string
	Size int
	// Maskable: the background fills the square and the mark stays in the
	// central 80% (Android crops to its own shape). Opaque icons (Apple's)
	// have no rounded corners either: the system rounds them.
	Maskable, Opaque bool
}

// Icons are the app's PNG icons (web/static).
var Icons = []Icon{
	{Name: "icon-192.png", Size: 192},
	{Name: "icon-512.png", Size: 512},
	{Name: "icon-maskable-512.png", Size: 512, Maskable: true},
	{Name: "apple-touch-icon.png", Size: 180, Opaque: true},
}

var (
	accent = [3]float64{0xd9, 0x77, 0x57}
	white  = [3]float64{0xff, 0xff, 0xff}
)

// segments of the mark in icon.svg's 64-unit box; strokes 5 wide, round.
var segments = [][4]float64{{20, 22, 32, 32}, {32, 32, 20, 42}, {34, 44, 46, 44}}

const strokeHalf = 2.5

// PNG draws ic.
func PNG(ic Icon) []byte {
	n := ic.Size
	img := image.NewNRGBA(image.Rect(0, 0, n, n))
	const ss = 4 // samples per axis
	unit := float64(n) / 64
	fullBleed := ic.Maskable || ic.Opaque
	scale := 1.0
	if ic.Maskable {
		scale = 0.7 // the mark well inside the safe zone
	}
	for y := range n {
		for x := range n {
			var bg, mark float64
			for sy := range ss {
				for sx := range ss {
					px := (float64(x) + (float64(sx)+0.5)/ss) / unit
					py := (float64(y) + (float64(sy)+0.5)/ss) / unit
					if fullBleed || inRoundRect(px, py, 64, 14) {
						bg++
						mx, my := 32+(px-32)/scale, 32+(py-32)/scale
						if onMark(mx, my) {
							mark++
						}
					}
				}
			}
			bg /= ss * ss
			mark /= ss * ss
			var c [3]float64
			for i := range c {
				if bg > 0 {
					c[i] = (accent[i]*(bg-mark) + white[i]*mark) / bg
				}
			}
			img.SetNRGBA(x, y, color.NRGBA{uint8(math.Round(c[0])), uint8(math.Round(c[1])), uint8(math.Round(c[2])), uint8(math.Round(bg * 255))})
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, img); err != nil {
		panic(err) // encoding to memory does not fail
	}
	return buf.Bytes()
}

func inRoundRect(x, y, size, r float64) bool {
	if x < 0 || y < 0 || x > size || y > size {
		return false
	}
	cx := math.Max(r, math.Min(size-r, x))
	cy := math.Max(r, math.Min(size-r, y))
	return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r
}

func onMark(x, y float64) bool {
	for _, s := range segments {
		if distToSegment(x, y, s[0], s[1], s[2], s[3]) <= strokeHalf {
			return true
		}
	}
	return false
}

func distToSegment(px, py, ax, ay, bx, by float64) float64 {
	dx, dy := bx-ax, by-ay
	t := ((px-ax)*dx + (py-ay)*dy) / (dx*dx + dy*dy)
	t = math.Max(0, math.Min(1, t))
	return math.Hypot(px-(ax+t*dx), py-(ay+t*dy))
}
