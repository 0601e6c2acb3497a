package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// The context meter in a session's header says how much of the window is
// in use, and tiny usage reads "<1%", not "0%".
func TestAppMeterTinyUsage(t *testing.T) {
	id, cli, ctx := meterSession(t)
	for _, c := range []struct {
		tokens int
		want   string
	}{{500, "<1%"}, {1999, "<1%"}, {2000, "1%"}, {101000, "51%"}} {
		cli.announce(id, map[string]any{"mode": "remote", "status": "idle", "usage": map[string]any{"input_tokens": c.tokens, "context_window": 200000}})
		waitJS(t, ctx, fmt.Sprintf("the meter at %d tokens", c.tokens), fmt.Sprintf(`(() => { const m = document.querySelector('.meter'); return !m.hidden && m.querySelector('.meter-label').textContent === %q })()`, c.want))
	}
	if !eval[bool](t, ctx, `document.querySelector('.meter').title === 'Context in use: 101k / 200k'`) {
		t.Errorf("meter title %q", eval[string](t, ctx, `document.querySelector('.meter').title`))
	}
}

// Claude's own count of its context (get_context_usage, remote mode) wins
// over the estimate from the last turn's usage.
func TestAppMeterClaudesCount(t *testing.T) {
	id, cli, ctx := meterSession(t)
	cli.announce(id, map[string]any{"mode": "remote", "status": "idle", "usage": map[string]any{"input_tokens": 2000, "context_window": 200000},
		"context": map[string]any{"usedTokens": 250000, "maxTokens": 1000000}})
	waitJS(t, ctx, "the meter at Claude's count", `(() => { const m = document.querySelector('.meter');
		return !m.hidden && m.querySelector('.meter-label').textContent === '25%' && m.title === "Context in use: 250k / 1.0M (Claude's count)"; })()`)
}

// meterSession opens a recorded session at phone size, with a CLI that can
// announce its state.
func meterSession(t *testing.T) (string, *fakeCLI, context.Context) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	return id, cli, ctx
}

// A turn's footer says what it cost once the CLI tells (remote mode's
// turnCosts), and changes when the cost does.
func TestAppTurnFooterCost(t *testing.T) {
	id, cli, ctx := meterSession(t)
	cli.envelopes(id, turn("co", "what did it cost", "Little.")...)
	turns := []string{"ctco"}
	waitJS(t, ctx, "the new turn completed", `document.querySelector('.blocks > .turn[data-turn="ctco"][data-status="completed"]') !== null`)
	footer := fmt.Sprintf(`document.querySelector('.blocks > .turn[data-turn=%q] .turn-end .meta')?.textContent || ''`, turns[0])
	if got := eval[string](t, ctx, footer); strings.Contains(got, "$") {
		t.Fatalf("a cost before any is known: %q", got)
	}
	for _, c := range []struct {
		usd  float64
		want string
	}{{0.0012, "$0.0012"}, {1.5, "$1.50"}} {
		cli.announce(id, map[string]any{"mode": "remote", "status": "idle", "turnCosts": []map[string]any{{"turn": turns[0], "usd": c.usd}}})
		waitJS(t, ctx, "the footer says "+c.want, fmt.Sprintf(`(%s).endsWith(%q)`, footer, " · "+c.want))
	}
}
