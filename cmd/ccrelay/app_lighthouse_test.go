package main

import (
	"encoding/json"
	"fmt"
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
// reach (issue: at least 0.98).
const MinLighthouseAccessibility = 0.98

// lighthouseConfig audits accessibility (and the DOM's size, to check that
// the page audited is the rendered one) at Lighthouse's default mobile
// form factor, after the page has had time to draw what the relay sends
// over its websocket (Lighthouse waits for load and network quiet, which
// a websocket does not count in).
const lighthouseConfig = `{"extends":"lighthouse:default","settings":{"onlyCategories":["accessibility"],"onlyAudits":["dom-size"],"pauseAfterLoadMs":2500,"networkQuietThresholdMs":2500,"cpuQuietThresholdMs":1000}}`

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

// The list and a session page score at least 0.98 in Lighthouse's
// accessibility audit (Lighthouse 12.8.2, mobile), audited once drawn: the
// audited DOM is at least as large as the page Chromium shows.
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
	audit := func(name, url string) lighthouseReport {
		t.Helper()
		out := filepath.Join(dir, name+".json")
		cmd := exec.Command(lh, url, "--config-path="+cfg, "--disable-storage-reset", "--quiet",
			"--output=json", "--output-path="+out,
			"--chrome-flags=--headless=new --no-sandbox --disable-dev-shm-usage --user-data-dir="+profile)
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
		return rep
	}
	list := audit("list", r.base+"/#token="+r.token)
	if n := list.Audits["dom-size"].NumericValue; n < float64(listSize)*0.9 {
		t.Errorf("the list audited had %v elements; drawn, it has %d: not the rendered page", n, listSize)
	}
	session := audit("session", r.base+"/#/s/"+id)
	if n := session.Audits["dom-size"].NumericValue; n < float64(sessionSize)*0.9 || !strings.Contains(session.FinalDisplayedURL, id) {
		t.Errorf("the session audited (%s) had %v elements; drawn, it has %d: not the rendered page", session.FinalDisplayedURL, n, sessionSize)
	}
}
