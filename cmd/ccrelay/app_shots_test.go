package main

// The app's pictures in the docs (docs/img): the session list, a session,
// a permission card with the keyboard up, and the usage chart, at a
// phone's size. `go test ./cmd/ccrelay -run TestAppDocScreenshots
// -update-shots` draws them again from the app as it is.

import (
	"bytes"
	"flag"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var updateShots = flag.Bool("update-shots", false, "draw docs/img's screenshots of the app again")

// shotsDir is where the docs keep the app's pictures.
var shotsDir = filepath.Join("..", "..", "docs", "img")

// shotScale is the device scale the pictures are taken at: 1 keeps each
// PNG small enough for the README.
const shotScale = 1

// maxShotBytes is the most a picture may weigh.
const maxShotBytes = 120 << 10

// docShots are the pictures, with their size in CSS px.
var docShots = []struct {
	name string
	w, h int
}{
	{"list", 390, 844},
	{"session", 390, 844},
	{"permission", 390, 460}, // the on-screen keyboard takes the rest
	{"usage", 390, 844},
}

// The docs show the app as it looks on a phone: each picture exists, is a
// PNG of its size at shotScale and stays under maxShotBytes. With
// -update-shots the test first draws them again: the relay seeded as for
// TestAppTapTargets, plus sessions with usage for the chart.
func TestAppDocScreenshots(t *testing.T) {
	if *updateShots {
		drawDocShots(t)
	}
	for _, s := range docShots {
		p := filepath.Join(shotsDir, s.name+".png")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v (go test ./cmd/ccrelay -run TestAppDocScreenshots -update-shots draws it)", p, err)
			continue
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: not a PNG: %v", p, err)
			continue
		}
		t.Logf("%s: %d×%d, %d KB", p, cfg.Width, cfg.Height, len(b)>>10)
		if cfg.Width != s.w*shotScale || cfg.Height != s.h*shotScale {
			t.Errorf("%s is %d×%d px, want %d×%d", p, cfg.Width, cfg.Height, s.w*shotScale, s.h*shotScale)
		}
		if len(b) > maxShotBytes {
			t.Errorf("%s weighs %d KB, want at most %d KB", p, len(b)>>10, maxShotBytes>>10)
		}
	}
}

// shotViewport is a phone's screen w×h CSS px at shotScale, touch.
func shotViewport(w, h int) chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(int64(w), int64(h), chromedp.EmulateScale(shotScale), chromedp.EmulateMobile, chromedp.EmulateTouch)
}

// drawDocShots takes the pictures and writes them to shotsDir.
func drawDocShots(t *testing.T) {
	r := startAppRelay(t)
	id := seedEverything(t, r)
	usage := seedUsageShots(t, r)
	ctx := newBrowser(t)
	must(t, ctx, shotViewport(390, 844), theme("dark"))
	write := func(name string) {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(shotsDir, name+".png")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}

	// The app counts usage from the sessions it keeps: those read here.
	for _, u := range usage {
		r.open(t, ctx, u)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the list", fmt.Sprintf(`document.querySelectorAll('.session-row').length === %d`, 4+len(usage)))
	write("list")

	r.open(t, ctx, id)
	showAll(t, ctx)
	waitJS(t, ctx, "the request", `!!document.querySelector('.perm[data-request="req-1"]')`)
	eval[bool](t, ctx, `(() => { for (const d of document.querySelectorAll('details.tool')) d.open = true; return true })()`)
	waitJS(t, ctx, "the cards open", `[...document.querySelectorAll('details.tool')].every((d) => d.querySelector('.tool-body'))`)
	// From the prompt whose turn thinks, fails a tool and runs a subagent.
	y := eval[float64](t, ctx, `(() => { const e = [...document.querySelectorAll('.blocks [data-id]')].find((e) => e.textContent.includes('try the risky thing'));
		const y = Math.max(0, Math.round(e.getBoundingClientRect().top + scrollY - 120)); scrollTo(0, y); return y })()`)
	waitJS(t, ctx, "the session scrolled", fmt.Sprintf(`Math.abs(scrollY - %v) < 2 || innerHeight + scrollY >= document.scrollingElement.scrollHeight - 1`, y))
	write("session")

	// The keyboard opens: 460 px of the screen are left.
	must(t, ctx, chromedp.Focus(chromedp.CSS(".composer textarea")), shotViewport(390, 460))
	waitJS(t, ctx, "the smaller screen", `visualViewport.height <= 461 && document.activeElement === document.querySelector('.composer textarea')`)
	waitJS(t, ctx, "the answers on screen", `(() => { const b = document.querySelector('.perm .perm-actions .allow'); if (!b) return false;
		const r = b.getBoundingClientRect(); return r.top >= 0 && r.bottom <= visualViewport.height })()`)
	write("permission")

	must(t, ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`), shotViewport(390, 844), chromedp.Navigate(r.base+"/#/usage"))
	waitJS(t, ctx, "the chart drawn", `document.body.dataset.usage === 'drawn' && document.querySelectorAll('svg.usage-chart rect.usage-bar').length > 0`)
	write("usage")
}

// seedUsageShots gives the relay three sessions in three projects with a
// week of usage, for the chart, and returns their ids.
func seedUsageShots(t *testing.T, r *appRelay) []string {
	t.Helper()
	cli := dialCLI(t, r)
	now := time.Now()
	noon := func(daysAgo int) int64 {
		return time.Date(now.Year(), now.Month(), now.Day()-daysAgo, 12, 0, 0, 0, time.Local).UnixMilli()
	}
	projects := []struct {
		id, cwd, model, prompt string
		days                   []int
	}{
		{"0c0c0c0c-9991-4222-8333-444444444444", "/home/dev/relay", "claude-sonnet-4-5-20250929", "Make the reconnect test fast again", []int{6, 5, 3, 2, 1, 0}},
		{"0c0c0c0c-9992-4222-8333-444444444444", "/home/dev/app", "claude-opus-4-1", "Add a dark theme to the settings page", []int{5, 4, 2, 0}},
		{"0c0c0c0c-9993-4222-8333-444444444444", "/home/dev/docs", "claude-haiku-4-5", "Proofread the install guide", []int{4, 3, 1}},
	}
	var ids []string
	for p, pr := range projects {
		var envs []string
		for k, d := range pr.days {
			n := int64((p+1)*1000 + k*700 + d*300)
			turn := fmt.Sprintf("cs%d%d", p, k)
			envs = append(envs,
				env(fmt.Sprintf("csu%d%d", p, k), noon(d), "user", "", textEv(pr.prompt)),
				usageEnv(fmt.Sprintf("csa%d%d", p, k), noon(d)+1, turn, n, n/3, 4*n, 20*n))
		}
		cli.envelopes(pr.id, envs...)
		cli.announce(pr.id, map[string]any{"cwd": pr.cwd, "machine": "laptop", "mode": "remote", "status": "idle", "model": pr.model})
		ids = append(ids, pr.id)
	}
	return ids
}
