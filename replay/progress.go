package replay

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// ProgressThreshold is the input size above which a progress bar is drawn.
const ProgressThreshold = 4 << 20

// ProgressBar draws a one-line progress bar, for a terminal.
type ProgressBar struct {
	w     io.Writer
	now   func() time.Time
	start time.Time
	drawn bool
}

// NewProgressBar returns a bar writing to w; now is the clock (time.Now).
func NewProgressBar(w io.Writer, now func() time.Time) *ProgressBar {
	return &ProgressBar{w: w, now: now}
}

// Update redraws the bar for read of total bytes. Inputs under
// ProgressThreshold draw nothing.
func (p *ProgressBar) Update(read, total int64) {
	if total < ProgressThreshold {
		return
	}
	if p.start.IsZero() {
		p.start = p.now()
	}
	const width = 30
	frac := float64(read) / float64(total)
	frac = max(0, min(frac, 1))
	n := int(frac * width)
	line := fmt.Sprintf("\r[%s%s] %3.0f%%  %.0f/%.0f MB", strings.Repeat("█", n), strings.Repeat("░", width-n),
		frac*100, float64(read)/1e6, float64(total)/1e6)
	if secs := p.now().Sub(p.start).Seconds(); secs > 0 {
		line += fmt.Sprintf("  %.0f MB/s", float64(read)/1e6/secs)
	}
	fmt.Fprint(p.w, line+" ")
	p.drawn = true
}

// Clear erases the bar if it was drawn.
func (p *ProgressBar) Clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[2K")
	}
}
