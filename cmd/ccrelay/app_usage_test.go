package main

// The usage page: tokens and cost per project and per day, drawn by the
// app from the sessions it keeps, checked against the envelopes the relay
// stored.

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// usageEnv is an agent text envelope carrying an API message's usage.
func usageEnv(id string, ms int64, turn string, in, out, cw, cr int64) string {
	return fmt.Sprintf(`{"id":%q,"time":%d,"role":"agent","turn":%q,"usage":{"input_tokens":%d,"output_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d},"ev":{"t":"text","text":"answer %s"}}`,
		id, ms, turn, in, out, cw, cr, id)
}

// barsJS reads the numbers of the tokens chart's bars.
const barsJS = `JSON.stringify([...document.querySelector('svg.usage-chart').querySelectorAll('rect.usage-bar')].map((b) => ({
	Day: b.dataset.day, Project: b.dataset.project, Input: +b.dataset.input, Output: +b.dataset.output, CacheWrite: +b.dataset.cacheWrite,
	CacheRead: +b.dataset.cacheRead, Tokens: +b.dataset.tokens, Cost: +b.dataset.cost, Costed: b.dataset.cost !== '', Uncosted: +b.dataset.uncosted })))`

// chartBarsJS reads the bars of the page's n-th chart (0: tokens, 1:
// cost), each with its drawn height, as JSON.
const chartBarsJS = `((n) => JSON.stringify([...document.querySelectorAll('svg.usage-chart')[n].querySelectorAll('rect.usage-bar')].map((b) => ({
	Day: b.dataset.day, Project: b.dataset.project, Input: +b.dataset.input, Output: +b.dataset.output, CacheWrite: +b.dataset.cacheWrite,
	CacheRead: +b.dataset.cacheRead, Tokens: +b.dataset.tokens, Cost: +b.dataset.cost, Costed: b.dataset.cost !== '', Uncosted: +b.dataset.uncosted,
	Height: +b.getAttribute('height') }))))`

// usageCell is what the page should show for a day and a project.
type usageCell struct {
	Day, Project                                 string
	Input, Output, CacheWrite, CacheRead, Tokens int64
	Cost                                         float64
	Costed                                       bool
	Uncosted                                     int64
	Estimated                                    bool    // a turn's cost came from the price table
	Height                                       float64 // a bar's, as drawn
}

// checkBars compares a chart's bars with the cells the envelopes give
// (those with a value above 0) and checks each bar's height is its value
// in the chart's scale: the tallest bar's value over its height.
func checkBars(t *testing.T, chart string, bars []usageCell, want map[string]*usageCell, value func(usageCell) float64) {
	t.Helper()
	n := 0
	for _, w := range want {
		if value(*w) > 0 {
			n++
		}
	}
	if len(bars) != n {
		t.Errorf("the %s chart has %d bars, want %d: %+v", chart, len(bars), n, bars)
	}
	var top usageCell
	for _, b := range bars {
		if b.Height > top.Height {
			top = b
		}
	}
	for _, b := range bars {
		w := want[b.Day+"/"+b.Project]
		if w == nil {
			t.Errorf("the %s chart: a bar for %s %s, which has no usage", chart, b.Day, b.Project)
			continue
		}
		if b.Input != w.Input || b.Output != w.Output || b.CacheWrite != w.CacheWrite || b.CacheRead != w.CacheRead || b.Tokens != w.Tokens ||
			b.Costed != w.Costed || math.Abs(b.Cost-w.Cost) > 1e-6 || b.Uncosted != w.Uncosted {
			t.Errorf("the %s chart, bar %s %s: %+v, the envelopes say %+v", chart, b.Day, b.Project, b, *w)
		}
		// (A sliver of half a unit at least, so that a small day shows.)
		if exp := math.Max(0.5, value(*w)/value(top)*top.Height); math.Abs(b.Height-exp) > 0.02+exp*0.001 {
			t.Errorf("the %s chart, bar %s %s: %.2f tall, its value wants %.2f", chart, b.Day, b.Project, b.Height, exp)
		}
	}
}

// The usage page at 390×844: two projects over three days, one session on
// a model with a list price (claude-sonnet-4-5, whose turns are estimated,
// but for two turns whose cost Claude reported, which count as reported:
// one alone on its day, whose cost is not labelled an estimate),
// one on a model without one (counted in tokens, with no cost), and usage
// older than 30 days left out. Each bar's data-* and each table row say the
// sums of the stored envelopes' usage, on both charts (tokens, cost), each
// bar as tall as its value; the estimate is labelled as one; the
// per-session totals (tokens of each kind, cost) are one tap away; axe finds nothing in either theme;
// offline, from what the device keeps, the chart says the same.
func TestAppUsagePage(t *testing.T) {
	script := axeScript(t)
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	const known, unknown = "0c0c0c0c-7777-4222-8333-444444444441", "0c0c0c0c-7777-4222-8333-444444444442"
	now := time.Now()
	noon := func(daysAgo int) int64 {
		return time.Date(now.Year(), now.Month(), now.Day()-daysAgo, 12, 0, 0, 0, time.Local).UnixMilli()
	}
	cli.envelopes(known,
		env("cku0", noon(40), "user", "", textEv("long ago")),
		usageEnv("cka0", noon(40)+1, "ctold", 9000, 9000, 9000, 9000),
		env("cku1", noon(3), "user", "", textEv("first")),
		usageEnv("cka1", noon(3)+1, "ctk1", 1200, 300, 5000, 20000),
		usageEnv("cka2", noon(3)+2, "ctk1", 800, 150, 0, 25000),
		env("cku2", noon(1), "user", "", textEv("second")),
		usageEnv("cka3", noon(1)+1, "ctk2", 400, 900, 1000, 30000),
		env("cku3", noon(1)+10, "user", "", textEv("third")),
		usageEnv("cka4", noon(1)+11, "ctk3", 100, 50, 0, 1000),
		env("cku4", noon(2)+20, "user", "", textEv("fourth")),
		usageEnv("cka5", noon(2)+21, "ctk4", 300, 60, 0, 2000),
	)
	const reported, reported4 = 0.4321, 0.0789 // Claude's figures for turns ctk3 and ctk4 (a day of its own)
	cli.announce(known, map[string]any{"cwd": "/home/dev/alpha", "machine": "laptop", "mode": "remote", "status": "idle",
		"model": "claude-sonnet-4-5-20250929", "turnCosts": []map[string]any{{"turn": "ctk3", "usd": reported}, {"turn": "ctk4", "usd": reported4}}})
	cli.envelopes(unknown,
		env("cuu1", noon(2), "user", "", textEv("other")),
		usageEnv("cua1", noon(2)+1, "ctu1", 700, 70, 7, 7000),
		env("cuu2", noon(1), "user", "", textEv("other again")),
		usageEnv("cua2", noon(1)+1, "ctu2", 10, 20, 30, 40),
	)
	cli.announce(unknown, map[string]any{"cwd": "/home/dev/beta", "machine": "laptop", "mode": "remote", "status": "idle", "model": "claude-opus-5-5"})

	// What the page should say, from the envelopes as the relay stored them.
	price := map[string][4]float64{known: {3, 15, 3.75, 0.3}}
	project := map[string]string{known: "alpha", unknown: "beta"}
	turnCost := map[string]float64{"ctk3": reported, "ctk4": reported4}
	cutoff := time.Date(now.Year(), now.Month(), now.Day()-29, 0, 0, 0, 0, time.Local).UnixMilli()
	want := map[string]*usageCell{}
	perSession := map[string]*usageCell{}
	counted := map[*usageCell]map[string]bool{} // the reported turns each cell counted
	for _, id := range []string{known, unknown} {
		perSession[id] = &usageCell{}
		for _, l := range storedLines(t, r.data, id) {
			var e struct {
				Time  int64  `json:"time"`
				Turn  string `json:"turn"`
				Usage *struct {
					In  int64 `json:"input_tokens"`
					Out int64 `json:"output_tokens"`
					CW  int64 `json:"cache_creation_input_tokens"`
					CR  int64 `json:"cache_read_input_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatal(err)
			}
			if e.Usage == nil || e.Time < cutoff {
				continue
			}
			day := time.UnixMilli(e.Time).Format("2006-01-02")
			k := day + "/" + project[id]
			if want[k] == nil {
				want[k] = &usageCell{Day: day, Project: project[id]}
			}
			u := e.Usage
			for _, c := range []*usageCell{want[k], perSession[id]} {
				c.Input += u.In
				c.Output += u.Out
				c.CacheWrite += u.CW
				c.CacheRead += u.CR
				c.Tokens += u.In + u.Out + u.CW + u.CR
				p, ok := price[id]
				switch usd, rep := turnCost[e.Turn]; {
				case rep:
					if counted[c] == nil {
						counted[c] = map[string]bool{}
					}
					if !counted[c][e.Turn] {
						counted[c][e.Turn] = true
						c.Cost += usd
						c.Costed = true
					}
				case ok:
					c.Cost += (float64(u.In)*p[0] + float64(u.Out)*p[1] + float64(u.CW)*p[2] + float64(u.CR)*p[3]) / 1e6
					c.Costed = true
					c.Estimated = true
				default:
					c.Uncosted += u.In + u.Out + u.CW + u.CR
				}
			}
		}
	}
	if len(want) != 5 {
		t.Fatalf("the seed should give 5 day-project cells, got %d", len(want))
	}

	ctx := newBrowser(t)
	must(t, ctx, phone390())
	// The app counts the sessions it keeps: those read here.
	for _, id := range []string{known, unknown} {
		r.open(t, ctx, id)
	}
	waitJS(t, ctx, "both sessions kept", `(() => { const q = indexedDB.open('ccrelay'); q.onsuccess = () => {
		const g = q.result.transaction('envelopes').objectStore('envelopes').count(); g.onsuccess = () => { window.keptCount = g.result; q.result.close(); }; };
		return window.keptCount === 15 })()`)
	must(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
	waitJS(t, ctx, "the list", `!!document.querySelector('header a[href="#/usage"]')`)
	click(t, ctx, `header a[href="#/usage"]`)
	waitJS(t, ctx, "the chart drawn", `document.body.dataset.usage === 'drawn'`)

	v := eval[string](t, ctx, barsJS)
	// Both charts: tokens, and the estimated cost (only where there is one).
	for i, c := range []struct {
		name  string
		value func(usageCell) float64
	}{
		{"tokens", func(c usageCell) float64 { return float64(c.Tokens) }},
		{"cost", func(c usageCell) float64 { return c.Cost }},
	} {
		var bars []usageCell
		if err := json.Unmarshal([]byte(eval[string](t, ctx, fmt.Sprintf("%s(%d)", chartBarsJS, i))), &bars); err != nil {
			t.Fatal(err)
		}
		sort.Slice(bars, func(i, j int) bool { return bars[i].Day+bars[i].Project < bars[j].Day+bars[j].Project })
		checkBars(t, c.name, bars, want, c.value)
	}

	// The table alternative says the same numbers.
	rows := eval[[][]string](t, ctx, `[...document.querySelectorAll('.usage-table tbody tr')].map((r) => [...r.children].map((c) => c.textContent))`)
	if len(rows) != len(want) {
		t.Errorf("the table has %d rows, want %d: %q", len(rows), len(want), rows)
	}
	for _, row := range rows {
		if len(row) != 7 {
			t.Errorf("a table row %q", row)
			continue
		}
		w := want[row[0]+"/"+row[1]]
		if w == nil {
			t.Errorf("a table row for %s %s, which has no usage", row[0], row[1])
			continue
		}
		got := strings.Join(row[2:6], " ")
		if exp := fmt.Sprintf("%d %d %d %d", w.Input, w.Output, w.CacheWrite, w.CacheRead); got != exp {
			t.Errorf("table %s %s: tokens %s, want %s", row[0], row[1], got, exp)
		}
		switch {
		case !w.Costed && row[6] != "no price":
			t.Errorf("table %s %s: cost %q for a model without a price, want \"no price\"", row[0], row[1], row[6])
		case w.Costed && !strings.HasPrefix(row[6], fmt.Sprintf("$%.2f", w.Cost)) && !strings.HasPrefix(row[6], fmt.Sprintf("$%.4f", w.Cost)):
			t.Errorf("table %s %s: cost %q, want $%.4f", row[0], row[1], row[6], w.Cost)
		case strings.Contains(row[6], "(est.)") != w.Estimated:
			t.Errorf("table %s %s: cost %q, estimated from the price table: %v", row[0], row[1], row[6], w.Estimated)
		}
	}

	// The estimate says it is one, with the prices' source and date.
	label := eval[string](t, ctx, `(() => { const e = document.querySelector('.usage-estimate'); return e && e.checkVisibility() ? e.textContent : '' })()`)
	if !strings.Contains(label, "estimates") || !strings.Contains(label, "published list prices") || !strings.Contains(label, "2025-") {
		t.Errorf("the estimate's label: %q", label)
	}

	// Per-session totals, one tap away.
	click(t, ctx, ".usage-per-session > summary")
	waitJS(t, ctx, "the sessions shown", `[...document.querySelectorAll('.usage-sessions li')].every((li) => li.checkVisibility()) && document.querySelectorAll('.usage-sessions li').length === 2`)
	for _, id := range []string{known, unknown} {
		w := perSession[id]
		got := eval[[]string](t, ctx, fmt.Sprintf(`(() => { const li = document.querySelector('.usage-sessions li[data-session=%q]');
			return li && li.checkVisibility() ? [li.dataset.tokens, li.dataset.cost, li.dataset.input, li.dataset.output, li.dataset.cacheWrite, li.dataset.cacheRead, li.textContent] : [] })()`, id))
		cost := ""
		if w.Costed {
			cost = fmt.Sprintf("%.6f", w.Cost)
		}
		if len(got) != 7 || got[0] != fmt.Sprint(w.Tokens) || got[1] != cost ||
			strings.Join(got[2:6], " ") != fmt.Sprintf("%d %d %d %d", w.Input, w.Output, w.CacheWrite, w.CacheRead) {
			t.Errorf("session %s: tokens and cost %q, want %d %q (in, out, cache write, cache read %d %d %d %d)", project[id], got, w.Tokens, cost, w.Input, w.Output, w.CacheWrite, w.CacheRead)
		}
		if len(got) == 7 && w.Costed && !strings.Contains(got[6], fmt.Sprintf("$%.2f", w.Cost)) && !strings.Contains(got[6], fmt.Sprintf("$%.4f", w.Cost)) {
			t.Errorf("session %s says %q, without its cost $%.4f", project[id], got[6], w.Cost)
		}
	}
	screenshot(t, ctx, "usage")

	click(t, ctx, ".usage-table-wrap > summary")
	for _, th := range []string{"light", "dark"} {
		must(t, ctx, theme(th))
		for _, v := range runAxe(t, ctx, script) {
			t.Errorf("the usage page, %s theme: %s (%s, %s):\n  %s", th, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
		}
	}

	// Offline: the relay stops, the page loads from the service worker and
	// draws the same numbers from what the device keeps.
	waitJS(t, ctx, "the service worker controlling the page", `!!navigator.serviceWorker.controller`)
	r.cmd.Process.Signal(syscall.SIGTERM)
	r.cmd.Wait()
	must(t, ctx, chromedp.Navigate(r.base+"/#/usage"), chromedp.Reload())
	waitJS(t, ctx, "the chart drawn offline", `document.body.dataset.usage === 'drawn'`)
	if off := eval[string](t, ctx, barsJS); off != v {
		t.Errorf("offline, the chart says\n%s\nonline it said\n%s", off, v)
	}
}

// A session longer than the app opens at first (app.js TAIL, 2,000) is
// kept whole once its earlier part is read after the first paint, so the
// usage page counts its first turns too: here its first and its last
// envelope carry usage, 2,999 envelopes apart.
func TestAppUsageCountsWholeLongSession(t *testing.T) {
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	const id = "0c0c0c0c-8888-4222-8333-444444444441"
	const n = 3100
	t0 := time.Now().Add(-2 * time.Hour).UnixMilli()
	var envs []string
	for i := range n {
		switch i {
		case 0:
			envs = append(envs, usageEnv("clfirst", t0, "ctfirst", 1000, 200, 30, 4))
		case n - 1:
			envs = append(envs, usageEnv("cllast", t0+int64(i), "ctlast", 5, 6, 7, 8))
		default:
			envs = append(envs, env(fmt.Sprintf("cl%d", i), t0+int64(i), "user", "", textEv(fmt.Sprintf("prompt %d", i))))
		}
		if len(envs) == 500 || i == n-1 {
			cli.envelopes(id, envs...)
			envs = nil
		}
	}
	cli.announce(id, map[string]any{"cwd": "/home/dev/long", "machine": "laptop", "mode": "remote", "status": "idle", "model": "claude-haiku-4-5"})

	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the whole session kept", fmt.Sprintf(`(() => { const q = indexedDB.open('ccrelay'); q.onsuccess = () => {
		const g = q.result.transaction('sessions').objectStore('sessions').get(%q); g.onsuccess = () => { window.kept = g.result && [g.result.first, g.result.last]; q.result.close(); }; };
		return JSON.stringify(window.kept) === '[1,%d]' })()`, id, n))
	must(t, ctx, chromedp.Navigate(r.base+"/#/usage"))
	waitJS(t, ctx, "the chart drawn", `document.body.dataset.usage === 'drawn'`)
	got := eval[[]string](t, ctx, fmt.Sprintf(`(() => { const li = document.querySelector('.usage-sessions li[data-session=%q]'); return li ? [li.dataset.tokens, li.dataset.cost] : [] })()`, id))
	tokens := 1000 + 200 + 30 + 4 + 5 + 6 + 7 + 8
	cost := (1005*1.0 + 206*5.0 + 37*1.25 + 12*0.1) / 1e6
	if len(got) != 2 || got[0] != fmt.Sprint(tokens) || got[1] != fmt.Sprintf("%.6f", cost) {
		t.Errorf("the long session counts %q, want %d tokens and %.6f", got, tokens, cost)
	}
}
