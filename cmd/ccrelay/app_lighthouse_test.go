package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// lighthouseEnv names the Lighthouse CLI the accessibility audit runs;
// .ci/run installs it, pinned.
const lighthouseEnv = "CCRELAY_TEST_LIGHTHOUSE"

// MinLighthouseAccessibility is the score the list and a session page must
// reach, in the light and the dark theme.
const MinLighthouseAccessibility = 1.00

// lighthouseConfig audits accessibility (and the DOM's size, to check that
// the page audited is the rendered one, and its final screenshot, to check
// the theme it was drawn in) at Lighthouse's default mobile
// form factor, after the page has had time to draw what the relay sends
// over its websocket (Lighthouse waits for load and network quiet, which
// a websocket does not count in).
const lighthouseConfig = `{"extends":"lighthouse:default","settings":{"onlyCategories":["accessibility"],"onlyAudits":["dom-size","final-screenshot"],"pauseAfterLoadMs":2500,"networkQuietThresholdMs":2500,"cpuQuietThresholdMs":1000}}`

func lighthouse(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(lighthouseEnv); p != "" {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no Lighthouse: CI must install it (.ci/run sets %s)", lighthouseEnv)
	}
	t.Skipf("no Lighthouse (set %s)", lighthouseEnv)
	return ""
}

// lighthouseReport is what the test reads of a report.
type lighthouseReport struct {
	FinalDisplayedURL string `json:"finalDisplayedUrl"`
	RuntimeError      *struct {
		Message string `json:"message"`
	} `json:"runtimeError"`
	Categories map[string]struct {
		Score *float64 `json:"score"`
	} `json:"categories"`
	Audits map[string]struct {
		ID               string          `json:"id"`
		Title            string          `json:"title"`
		Score            *float64        `json:"score"`
		ScoreDisplayMode string          `json:"scoreDisplayMode"`
		NumericValue     float64         `json:"numericValue"`
		Details          json.RawMessage `json:"details"`
	} `json:"audits"`
}

// The list and a session page score 1.00 in Lighthouse's
// accessibility audit (Lighthouse 12.8.2, mobile), audited once drawn: the
// audited DOM is at least as large as the page Chromium shows; in the
// light theme and in the dark one (the system's, prefers-color-scheme:
// dark), contrast included: each audit's final screenshot shows the theme.
func TestAppLighthouse(t *testing.T) {
	lh := lighthouse(t)
	browser := chromium(t)
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+"/public/spotter/test/fixtures/transcripts/4d5611e5-241a-462a-8d15-5122611a9569.jsonl")

	// How large each page is once drawn, in Chromium driven here.
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the list", fmt.Sprintf(`!!document.querySelector('li[data-session=%q]')`, id))
	listSize := eval[int](t, ctx, `document.body.getElementsByTagName('*').length`)
	r.open(t, ctx, id)
	sessionSize := eval[int](t, ctx, `document.body.getElementsByTagName('*').length`)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "lighthouse.json")
	if err := os.WriteFile(cfg, []byte(lighthouseConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	profile := filepath.Join(dir, "profile") // one profile: the first run keeps the token
	tmp := socketDir(t)
	audit := func(name, url string, dark bool) lighthouseReport {
		t.Helper()
		out := filepath.Join(dir, name+".json")
		flags := "--headless=new --no-sandbox --disable-dev-shm-usage --user-data-dir=" + profile
		if dark {
			flags += " --force-dark-mode" // the system's theme: prefers-color-scheme: dark
		}
		cmd := exec.Command(lh, url, "--config-path="+cfg, "--disable-storage-reset", "--quiet",
			"--output=json", "--output-path="+out, "--chrome-flags="+flags)
		cmd.Env = append(os.Environ(), "CHROME_PATH="+browser, "TMPDIR="+tmp)
		start := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("lighthouse %s: %v\n%s", name, err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var rep lighthouseReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.RuntimeError != nil && rep.RuntimeError.Message != "" {
			t.Fatalf("lighthouse %s: %s", name, rep.RuntimeError.Message)
		}
		score := rep.Categories["accessibility"].Score
		if score == nil {
			t.Fatalf("lighthouse %s: no accessibility score", name)
		}
		t.Logf("%s (%s): accessibility %.2f, %v elements audited, in %v", name, rep.FinalDisplayedURL, *score, rep.Audits["dom-size"].NumericValue, time.Since(start).Round(time.Second))
		if *score < MinLighthouseAccessibility {
			var failed []string
			for _, a := range rep.Audits {
				if a.Score != nil && *a.Score < 1 && a.ScoreDisplayMode == "binary" {
					failed = append(failed, fmt.Sprintf("%s (%s): %.300s", a.ID, a.Title, a.Details))
				}
			}
			t.Errorf("%s: accessibility %.2f, want at least %.2f; failing audits:\n%s", name, *score, MinLighthouseAccessibility, strings.Join(failed, "\n"))
		}
		l := screenshotLightness(t, rep.Audits["final-screenshot"].Details)
		t.Logf("%s: the final screenshot's mean lightness %.2f", name, l)
		if (l < 0.5) != dark {
			t.Errorf("%s: audited in the wrong theme (the final screenshot's mean lightness %.2f)", name, l)
		}
		return rep
	}
	for _, dark := range []bool{false, true} {
		theme := map[bool]string{false: "light", true: "dark"}[dark]
		list := audit("list-"+theme, r.base+"/#token="+r.token, dark)
		if n := list.Audits["dom-size"].NumericValue; n < float64(listSize)*0.9 {
			t.Errorf("the list audited (%s) had %v elements; drawn, it has %d: not the rendered page", theme, n, listSize)
		}
		session := audit("session-"+theme, r.base+"/#/s/"+id, dark)
		if n := session.Audits["dom-size"].NumericValue; n < float64(sessionSize)*0.9 || !strings.Contains(session.FinalDisplayedURL, id) {
			t.Errorf("the session audited (%s, %s) had %v elements; drawn, it has %d: not the rendered page", session.FinalDisplayedURL, theme, n, sessionSize)
		}
	}
}

// screenshotLightness is the mean lightness (0 black, 1 white) of the
// screenshot in a Lighthouse final-screenshot audit's details.
func screenshotLightness(t *testing.T, details json.RawMessage) float64 {
	t.Helper()
	var d struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(details, &d); err != nil || !strings.HasPrefix(d.Data, "data:image/jpeg;base64,") {
		t.Fatalf("no final screenshot in the report (%.100s): %v", details, err)
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(d.Data, "data:image/jpeg;base64,"))
	if err != nil {
		t.Fatalf("the final screenshot: %v", err)
	}
	img, err := jpeg.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the final screenshot: %v", err)
	}
	var sum float64
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			sum += (0.2126*float64(r) + 0.7152*float64(g) + 0.0722*float64(b)) / 0xffff
		}
	}
	return sum / float64(bounds.Dx()*bounds.Dy())
}
