package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
	"github.com/chromedp/chromedp"
)

// storedBlob is what the relay in data keeps beside envelope id.
func storedBlob(t *testing.T, data, session, id string) []byte {
	t.Helper()
	st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := st.Blob(context.Background(), session, id)
	if err != nil {
		t.Fatalf("blob %s/%s: %v", session, id, err)
	}
	return b
}

// A corpus session with cut tool results, replayed through the CLI's
// outbox into a relay: a cut result's card offers "Show all", which
// fetches the full text the relay kept and shows all of it.
func TestAppShowAllFetchesFullResult(t *testing.T) {
	r := startAppRelay(t)
	id, envs := r.replay(t, filepath.Join(corpus, "public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"))
	var end *protocol.Envelope
	for i := range envs {
		if e := &envs[i]; e.Ev.T == protocol.KindToolCallEnd && e.Ev.Full > 0 && e.Subagent == "" {
			end = e
			break
		}
	}
	if end == nil {
		t.Fatal("no top-level cut result with a full text in the session")
	}
	full := string(storedBlob(t, r.data, id, end.ID))
	if int64(len(full)) != end.Ev.Full || !strings.HasPrefix(full, *end.Ev.Result) {
		t.Fatalf("the relay keeps %d bytes for a full of %d", len(full), end.Ev.Full)
	}
	// A line of the result past its preview, to look for on the page.
	var tail string
	for _, l := range strings.Split(full[len(*end.Ev.Result):], "\n") {
		// A Read result's line numbers are shown apart from the lines.
		if _, after, ok := strings.Cut(l, "→"); ok {
			l = after
		}
		if l = strings.TrimSpace(l); len(l) > 20 && !strings.Contains(*end.Ev.Result, l) {
			tail = l
			break
		}
	}
	if tail == "" {
		t.Fatal("no line past the preview")
	}
	ctx := newBrowser(t)
	must(t, ctx, phone())
	r.open(t, ctx, id)
	showAll(t, ctx)
	card := fmt.Sprintf(`document.querySelector('details.tool[data-call=%q]')`, end.Ev.Call)
	waitJS(t, ctx, "the card open with its Show all button", fmt.Sprintf(`(() => { const c = %s; if (!c) return false; c.open = true; return !!c.querySelector('.show-all') })()`, card))
	if eval[bool](t, ctx, fmt.Sprintf(`%s.querySelector('.tool-body').innerText.includes(%q)`, card, tail)) {
		t.Fatal("the preview already shows the line past 4 KB")
	}
	label := eval[string](t, ctx, card+`.querySelector('.show-all').textContent`)
	if want := fmt.Sprintf("Show all %d KB", (len(full)+1023)/1024); label != want {
		t.Errorf("button says %q, want %q", label, want)
	}
	must(t, ctx, chromedp.Click(fmt.Sprintf(`details.tool[data-call=%q] .show-all`, end.Ev.Call)))
	waitJS(t, ctx, "the full result shown", fmt.Sprintf(`%s.querySelector('.tool-body').innerText.includes(%q)`, card, tail))
	if eval[bool](t, ctx, card+`.querySelector('.show-all, .preview-note') !== null`) {
		t.Error("the preview note is still there after the full result came")
	}
	// Each line stays beside its number: long lines scroll, never wrap,
	// and the lines of code are as tall as the numbers' whatever monospace
	// fonts the device has: here with the fonts there are, then with a
	// monospace font whose ascent and descent differ from the generic
	// monospace's (a code element in the font the browser picks for
	// "monospace" made each line a pixel taller than its number when
	// Liberation Mono was installed).
	if end.Ev.Full > 0 && strings.Contains(full, "→") {
		lastLineBesideItsNumber(t, ctx, card, "the fonts there are")
		loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(async () => {
			const f = new FontFace('ccrelay-test-mono', ['DejaVu Sans Mono', 'Liberation Mono', 'Noto Sans Mono', 'Courier New', 'Menlo', 'Consolas', 'DejaVu Sans', 'Liberation Sans', 'Arial'].map((n) => 'local("' + n + '")').join(', '),
				{ ascentOverride: '130%', descentOverride: '45%' });
			document.fonts.add(await f.load().catch(() => f));
			if (f.status !== 'loaded') return false;
			document.documentElement.style.setProperty('--mono', '"ccrelay-test-mono", monospace');
			return true; })()`, chromedp.EvalAwaitPromise))
		if err != nil || !loaded {
			t.Fatalf("no local font to make a monospace font of (%v)", err)
		}
		lastLineBesideItsNumber(t, ctx, card, "a monospace font unlike the generic one")
	}
	shoot(t, ctx, fmt.Sprintf(`details.tool[data-call=%q]`, end.Ev.Call), "show-all")
}

// A prompt with images (a corpus transcript of Claude Code 2.0.55): each
// image shows in the prompt, drawn from the bytes the relay kept, at its
// own size.
func TestAppPromptImages(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(corpus, "public/claude-code-log/test/test_data/debug_image_message.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// replay takes the session id from the file's name.
	transcript := filepath.Join(t.TempDir(), "15eaa3ee-d16e-4fdc-b5b5-ed52c42219bb.jsonl")
	if err := os.WriteFile(transcript, src, 0o600); err != nil {
		t.Fatal(err)
	}
	r := startAppRelay(t)
	id, envs := r.replay(t, transcript)
	var files []protocol.Envelope
	for _, e := range envs {
		if e.Ev.T == protocol.KindFile {
			files = append(files, e)
			if b := storedBlob(t, r.data, id, e.ID); int64(len(b)) != *e.Ev.Size {
				t.Fatalf("the relay keeps %d bytes of a %d-byte image", len(b), *e.Ev.Size)
			}
		}
	}
	if len(files) != 2 || files[0].Ev.Image == nil {
		t.Fatalf("%d file envelopes, want the transcript's 2 PNGs with their sizes", len(files))
	}
	ctx := newBrowser(t)
	must(t, ctx, phone())
	r.open(t, ctx, id)
	waitJS(t, ctx, "both images drawn", `[...document.querySelectorAll('.msg.user figure.image img')].filter((i) => i.complete && i.naturalWidth > 0).length === 2`)
	got := eval[[]map[string]any](t, ctx, `[...document.querySelectorAll('.msg.user figure.image')].map((f) => ({ w: f.querySelector('img').naturalWidth, h: f.querySelector('img').naturalHeight, caption: f.querySelector('figcaption').textContent, alt: f.querySelector('img').alt }))`)
	for i, f := range files {
		g := got[i]
		if int64(g["w"].(float64)) != f.Ev.Image.Width || int64(g["h"].(float64)) != f.Ev.Image.Height {
			t.Errorf("image %d drawn %v×%v, want %d×%d", i, g["w"], g["h"], f.Ev.Image.Width, f.Ev.Image.Height)
		}
		if c := g["caption"].(string); !strings.Contains(c, f.Ev.Name) || !strings.Contains(c, fmt.Sprintf("%d×%d", f.Ev.Image.Width, f.Ev.Image.Height)) {
			t.Errorf("caption %q", c)
		}
		if !strings.Contains(g["alt"].(string), f.Ev.Name) {
			t.Errorf("alt %q", g["alt"])
		}
	}
	shoot(t, ctx, `.msg.user figure.image`, "prompt-image")
}

// lastLineBesideItsNumber checks that the last line of code in the card
// (a Read result's lines, numbered in a gutter) stands beside its number.
func lastLineBesideItsNumber(t *testing.T, ctx context.Context, card, fonts string) {
	t.Helper()
	tops := eval[[]float64](t, ctx, `(() => {
		const [g, code] = [...`+card+`.querySelectorAll('.file-lines > pre')];
		const text = code.textContent, end = text.trimEnd().length, k = text.slice(0, end).split('\n').length - 1;
		const w = document.createTreeWalker(code, NodeFilter.SHOW_TEXT); let n, off = 0, node = null, at = 0;
		while ((n = w.nextNode())) { if (off + n.length >= end) { node = n; at = end - off; break; } off += n.length; }
		const r1 = document.createRange(); r1.setStart(node, at - 1); r1.setEnd(node, at);
		const gt = g.firstChild, lines = gt.textContent.split('\n'); let go = 0;
		for (let i = 0; i < k; i++) go += lines[i].length + 1;
		const r2 = document.createRange(); r2.setStart(gt, go); r2.setEnd(gt, go + 1);
		return [r2.getBoundingClientRect().top, r1.getBoundingClientRect().top]; })()`)
	if len(tops) != 2 || math.Abs(tops[0]-tops[1]) > 2 {
		t.Errorf("with %s, the last line number and the last line stand at %v px: a line wrapped or the lines are taller than the numbers", fonts, tops)
	}
}
