package main

// Browser tests of the app's tool renderers (web/static/js/tools.js): fed
// the real tool calls of the corpus and the bundled demo, malformed inputs,
// and permission requests from a CLI.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/internal/demo"
	"github.com/ccrelay/ccrelay/protocol"
)

// phone390 is the phone size the renderers are looked at (a 6.1" phone).
func phone390() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)
}

// corpusCall is one tool call of a transcript, as the mapper gives it to
// the app: its name, input object, and result preview.
type corpusCall struct {
	File      string         `json:"file"`
	Call      string         `json:"-"`
	Name      string         `json:"name"`
	Args      map[string]any `json:"args"`
	Result    string         `json:"result"`
	Status    string         `json:"status"`
	Truncated bool           `json:"truncated"`
	Diff      map[string]any `json:"diff,omitempty"`
}

// corpusCalls reads every tool call (with its result) of the transcripts
// under the folders given, in order, file by file.
func corpusCalls(t *testing.T, roots ...string) []corpusCall {
	t.Helper()
	var calls []corpusCall
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
				return err
			}
			calls = append(calls, fileCalls(t, p)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return calls
}

func fileCalls(t *testing.T, path string) []corpusCall {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []corpusCall
	byID := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var rec struct {
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || len(rec.Message) == 0 {
			continue
		}
		var msg struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(rec.Message, &msg) != nil {
			continue
		}
		var blocks []struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				var args map[string]any
				if json.Unmarshal(b.Input, &args) != nil || args == nil {
					var v any
					json.Unmarshal(b.Input, &v)
					args = map[string]any{"input": v}
				}
				byID[b.ID] = len(calls)
				calls = append(calls, corpusCall{File: filepath.Base(path), Call: b.ID, Name: b.Name, Args: args, Status: "running"})
			case "tool_result":
				i, ok := byID[b.ToolUseID]
				if !ok {
					continue
				}
				res := resultText(b.Content)
				if len(res) > protocol.MaxResultBytes {
					res = strings.ToValidUTF8(res[:protocol.MaxResultBytes], "")
					calls[i].Truncated = true
				}
				calls[i].Result = res
				calls[i].Status = "done"
				if b.IsError {
					calls[i].Status = "failed"
				}
			}
		}
	}
	return calls
}

func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, p.Text)
		} else {
			out = append(out, "[image]")
		}
	}
	return strings.Join(out, "\n")
}

// renderHarness renders calls (an array of corpusCall, in order, one model
// per file) with tools.js and reports what each card shows.
const renderHarness = `(async (calls) => {
  const m = await import('/js/tools.js');
  const models = new Map();
  const tools = calls.map((c, i) => {
    if (!models.has(c.file)) models.set(c.file, { calls: new Map() });
    const model = models.get(c.file);
    const t = { kind: 'tool', call: 'call' + i, name: c.name, args: c.args, result: c.result, status: c.status, truncated: c.truncated, diff: c.diff || null, start: 1000, end: 3500 };
    model.calls.set(t.call, t);
    return [t, model];
  });
  const host = document.createElement('div');
  host.className = 'tool-body';
  document.body.append(host);
  const errors = [];
  const origError = console.error;
  console.error = (e) => errors.push(String(e && e.stack || e));
  const out = [];
  try {
    for (const [t, model] of tools) {
      const before = errors.length;
      const card = document.createElement('div');
      host.replaceChildren(card);
      let err = '';
      let title = '';
      try {
        const ti = m.toolTitle(t, model);
        title = typeof ti === 'string' ? ti : ti.textContent;
        card.append(...m.toolBody(t, model));
        m.toolPreview(t);
      } catch (e) { err = String(e && e.stack || e); }
      if (errors.length > before) err += errors.slice(before).join('\n');
      const q = (s) => [...card.querySelectorAll(s)];
      out.push({
        err, title,
        tool: card.querySelector('.tool-input')?.dataset.tool || '',
        generic: !!card.querySelector('.tool-input.generic'),
        adds: q('.dl.add .tx').map((e) => e.textContent),
        dels: q('.dl.del .tx').map((e) => e.textContent),
        numbered: !!card.querySelector('.diff.numbered'),
        firstNo: card.querySelector('.diff.numbered .dl:not(.skip) .ln')?.textContent || '',
        checks: q('.checklist .task-item').map((e) => e.dataset.status + ':' + e.textContent),
        headings: q('.plan h2, .plan h3, .plan h4, .plan h5, .plan h6').map((e) => e.textContent),
        options: q('.options .opt-label').map((e) => e.textContent),
        text: card.textContent.slice(0, 50000),
      });
    }
  } finally {
    console.error = origError;
    host.remove();
  }
  return out;
})`

// rendered is what renderHarness reports of one card.
type rendered struct {
	Err      string   `json:"err"`
	Title    string   `json:"title"`
	Tool     string   `json:"tool"`
	Generic  bool     `json:"generic"`
	Adds     []string `json:"adds"`
	Dels     []string `json:"dels"`
	Numbered bool     `json:"numbered"`
	FirstNo  string   `json:"firstNo"`
	Checks   []string `json:"checks"`
	Headings []string `json:"headings"`
	Options  []string `json:"options"`
	Text     string   `json:"text"`
}

// renderCalls loads the app's page and renders calls with the harness.
func renderCalls(t *testing.T, ctx context.Context, base string, calls []corpusCall) []rendered {
	t.Helper()
	b, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]rendered](renderHarness+"("+string(b)+")", chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if len(out) != len(calls) {
		t.Fatalf("%d cards for %d calls", len(out), len(calls))
	}
	return out
}

// renderers are the tools with a renderer of their own.
var renderers = []string{"Edit", "MultiEdit", "Write", "NotebookEdit", "Bash", "Read", "Grep", "Glob", "LS", "WebFetch", "WebSearch",
	"TodoWrite", "TaskCreate", "TaskUpdate", "ExitPlanMode", "AskUserQuestion", "mcp__github__create_issue", "apply_patch"}

func hasRenderer(name string) bool {
	return slices.Contains(renderers, name) || strings.HasPrefix(name, "mcp__")
}

var reHeading = regexp.MustCompile(`(?m)^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$`)

func lineSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		m[l] = true
	}
	return m
}

// checkDiff checks that a diff of old into new shows as added exactly the
// lines only new has, and as removed the lines only old has.
func checkDiff(t *testing.T, where string, edits [][2]string, adds, dels []string) {
	t.Helper()
	for _, e := range edits {
		oldL, newL := lineSet(e[0]), lineSet(e[1])
		for l := range newL {
			if !oldL[l] && e[1] != "" && !slices.Contains(adds, l) {
				t.Errorf("%s: added line %q not shown as added", where, l)
				return
			}
		}
		for l := range oldL {
			if !newL[l] && e[0] != "" && !slices.Contains(dels, l) {
				t.Errorf("%s: removed line %q not shown as removed", where, l)
				return
			}
		}
	}
	var allOld, allNew []string
	for _, e := range edits {
		allOld, allNew = append(allOld, e[0]), append(allNew, e[1])
	}
	oldL, newL := lineSet(strings.Join(allOld, "\n")), lineSet(strings.Join(allNew, "\n"))
	for _, l := range adds {
		if !newL[l] {
			t.Errorf("%s: %q shown as added, not in new_string", where, l)
		}
	}
	for _, l := range dels {
		if !oldL[l] {
			t.Errorf("%s: %q shown as removed, not in old_string", where, l)
		}
	}
}

func str(v any) string { s, _ := v.(string); return s }

func list(v any) []any { l, _ := v.([]any); return l }

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// Every tool call of the corpus and of the bundled demo, with its real input
// and result, renders with its tool's renderer (no fallback, no error), and
// shows what it should: an edit's diff has exactly the changed lines as
// added and removed, a TodoWrite's checklist its items and states, a plan
// its headings, a question its options, a command its text, a file written
// its content.
func TestAppRenderersOnCorpus(t *testing.T) {
	calls := corpusCalls(t, corpus, "../../internal/demo/session")
	seen := map[string]int{}
	for _, c := range calls {
		seen[c.Name]++
	}
	for _, name := range []string{"Edit", "MultiEdit", "Write", "Bash", "Read", "Grep", "Glob", "LS", "WebFetch", "WebSearch", "TodoWrite", "TaskCreate", "TaskUpdate", "ExitPlanMode", "AskUserQuestion"} {
		if seen[name] == 0 {
			t.Fatalf("the corpus has no %s call", name)
		}
	}
	t.Logf("%d tool calls: %v", len(calls), seen)
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, chromedp.Navigate(r.base+"/"))
	out := renderCalls(t, ctx, r.base, calls)
	for i, c := range calls {
		got := out[i]
		where := fmt.Sprintf("%s %s #%d", c.File, c.Name, i)
		if got.Err != "" {
			t.Errorf("%s: %s", where, got.Err)
			continue
		}
		if hasRenderer(c.Name) && (got.Tool != c.Name || got.Generic) {
			t.Errorf("%s: rendered as %q (generic %v)", where, got.Tool, got.Generic)
		}
		if !hasRenderer(c.Name) && !got.Generic {
			t.Errorf("%s: an unknown tool not shown as JSON", where)
		}
		a := c.Args
		switch c.Name {
		case "Edit":
			if o, n := str(a["old_string"]), str(a["new_string"]); len(o)+len(n) < 20000 {
				checkDiff(t, where, [][2]string{{o, n}}, got.Adds, got.Dels)
			}
		case "MultiEdit":
			var edits [][2]string
			for _, e := range list(a["edits"]) {
				m := obj(e)
				edits = append(edits, [2]string{str(m["old_string"]), str(m["new_string"])})
			}
			checkDiff(t, where, edits, got.Adds, got.Dels)
		case "TodoWrite":
			var want []string
			for _, x := range list(a["todos"]) {
				m := obj(x)
				text, st := str(m["content"]), str(m["status"])
				if st == "in_progress" && str(m["activeForm"]) != "" {
					text = str(m["activeForm"])
				}
				if text == "" {
					text = "(untitled)"
				}
				if st != "in_progress" && st != "completed" {
					st = "pending"
				}
				want = append(want, st+":"+text)
			}
			if !slices.Equal(got.Checks, want) {
				t.Errorf("%s: checklist %q, want %q", where, got.Checks, want)
			}
		case "ExitPlanMode":
			var want []string
			for _, m := range reHeading.FindAllStringSubmatch(str(a["plan"]), -1) {
				want = append(want, m[1])
			}
			if len(want) > 0 && !slices.Equal(got.Headings, want) {
				t.Errorf("%s: plan headings %q, want %q", where, got.Headings, want)
			}
		case "AskUserQuestion":
			var want []string
			for _, q := range list(a["questions"]) {
				for _, o := range list(obj(q)["options"]) {
					want = append(want, str(obj(o)["label"]))
				}
			}
			if !slices.Equal(got.Options, want) {
				t.Errorf("%s: options %q, want %q", where, got.Options, want)
			}
		case "Bash":
			if cmd := str(a["command"]); !strings.Contains(got.Text, firstLine(cmd)) || !strings.Contains(got.Title, firstLine(cmd)[:min(40, len(firstLine(cmd)))]) {
				t.Errorf("%s: command %q not the title / not shown", where, firstLine(cmd))
			}
		case "Write":
			content := str(a["content"])
			if strings.Contains(got.Text, "against the file as read before") {
				// A diff against an earlier Read of the whole file.
				for _, l := range got.Adds {
					if !lineSet(content)[l] {
						t.Errorf("%s: %q shown as added, not in the content", where, l)
					}
				}
			} else if l := firstLine(content); !strings.Contains(got.Text, l) {
				t.Errorf("%s: content %q not shown", where, l)
			}
		}
		switch c.Name {
		case "Read", "Edit", "Write", "MultiEdit", "LS":
			p := strings.TrimRight(str(a["file_path"])+str(a["path"]), `/\`)
			name := p[strings.LastIndexAny(p, `/\`)+1:]
			if p != "" && !strings.HasPrefix(got.Title, name) {
				t.Errorf("%s: title %q does not start with the file name %q", where, got.Title, name)
			}
		}
	}
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			return l
		}
	}
	return ""
}

// fuzzHarness feeds every renderer malformed inputs and results: a missing
// or non-object input, every field it reads missing, of each wrong type,
// huge, or full of escapes and markup, and broken nested lists. It reports
// the cases that threw or logged an error, and how long the slowest took.
const fuzzHarness = `(async (names) => {
  const m = await import('/js/tools.js');
  const huge = 'x'.repeat(300000);
  const hugeLines = Array.from({ length: 20000 }, (_, i) => 'line ' + (i * 7919 % 10007)).join('\n');
  const nasty = '<script>window.pwned=1</script>\x1b[31mred\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[38;5;300m\x1b[38;2;999;-1m\u0000\u202e' + '\n'.repeat(3);
  const wrong = [undefined, null, 7, -1.5, true, [], [1, 'a', null], { x: 1 }, '', huge, hugeLines, nasty];
  const fields = ['file_path', 'old_string', 'new_string', 'replace_all', 'edits', 'content', 'notebook_path', 'new_source', 'cell_type', 'edit_mode', 'cell_id',
    'command', 'description', 'run_in_background', 'offset', 'limit', 'pattern', 'path', 'glob', 'output_mode', 'url', 'prompt', 'query', 'todos',
    'subject', 'taskId', 'status', 'activeForm', 'plan', 'questions', 'allowed_domains', 'input', 'files'];
  const nested = [
    { edits: [null, 5, 'x', { old_string: 5, new_string: null }, { old_string: huge, new_string: huge + 'y' }, { old_string: hugeLines, new_string: hugeLines.split('\n').reverse().join('\n') }] },
    { todos: [null, 'x', 7, { content: 5, status: {}, activeForm: [] }, { content: huge, status: 'in_progress' }] },
    { questions: [null, 'q', { question: 5, options: 'x' }, { question: 'Q', options: [null, 5, { label: 7, description: {} }, { label: huge }] }] },
    { questions: { not: 'a list' } },
    { todos: Array.from({ length: 5000 }, (_, i) => ({ content: 'task ' + i, status: ['pending', 'in_progress', 'completed', 'bogus'][i % 4] })) },
    { plan: '# Plan\n' + '## step\n- item\n'.repeat(5000) },
    { old_string: 'a\nb\nc', new_string: 'a\nB\nc', file_path: '/x/y.go' },
  ];
  const results = [undefined, '', huge, hugeLines, nasty, '    1→x\n    2→y\n<system-reminder>', 'Exit code 137\n' + nasty, 'Found 2 files\n/a/b.go\nC:\\x\\y.ts', 'a.go:1:x\nb.go:zz:y'];
  const cases = [];
  for (const name of names) {
    for (const args of [undefined, null, 'a string', [1, 2], {}]) cases.push({ name, args });
    for (const f of fields) for (const v of wrong) cases.push({ name, args: { [f]: v } });
    for (const args of nested) cases.push({ name, args });
    for (const result of results) for (const status of ['done', 'failed', 'running', 'bogus']) cases.push({ name, args: { file_path: '/a/b.go', command: 'ls', pattern: 'x' }, result, status });
  }
  const model = { calls: new Map() };
  const host = document.createElement('div');
  document.body.append(host);
  const bad = [];
  const origError = console.error;
  let logged = [];
  console.error = (e) => logged.push(String(e && e.stack || e));
  let slowest = 0, slowCase = '';
  cases.forEach((c, i) => {
    const t = { kind: 'tool', call: 'f' + i, name: c.name, args: c.args, result: c.result, status: c.status || 'done', truncated: true, start: 5, end: 3 };
    model.calls.set(t.call, t);
    logged = [];
    const t0 = performance.now();
    try {
      const card = document.createElement('div');
      const ti = m.toolTitle(t, model);
      card.append(ti);
      card.append(...m.toolBody(t, model));
      card.append(m.toolInput(c.name, c.args, { model, answer: () => {} }, null));
      m.toolPreview(t);
      host.replaceChildren(card);
    } catch (e) {
      logged.push('threw: ' + String(e && e.stack || e));
    }
    const dt = performance.now() - t0;
    if (dt > slowest) { slowest = dt; slowCase = c.name + ' ' + String(JSON.stringify(c.args)).slice(0, 80); }
    if (logged.length) bad.push(c.name + ' ' + String(JSON.stringify(c.args)).slice(0, 120) + ' result ' + String(c.result).slice(0, 40) + ': ' + logged[0].slice(0, 300));
  });
  console.error = origError;
  host.remove();
  return { cases: cases.length, bad: bad.slice(0, 20), nbad: bad.length, slowest: Math.round(slowest), slowCase,
    pwned: window.pwned ?? null, scripts: document.querySelectorAll('body script').length };
})`

// Each renderer survives malformed inputs and results (missing fields,
// wrong types, huge strings, escapes and markup, broken nested lists)
// without throwing or falling back with an error, without running markup,
// and in bounded time; the page still renders a real card afterwards.
func TestAppRenderersMalformed(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, chromedp.Navigate(r.base+"/"))
	names, _ := json.Marshal(append(slices.Clone(renderers), "Unknown", "mcp__", "mcp__a__", "__proto__", "constructor", "toString"))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Cases    int      `json:"cases"`
		Bad      []string `json:"bad"`
		NBad     int      `json:"nbad"`
		Slowest  int      `json:"slowest"`
		SlowCase string   `json:"slowCase"`
		Pwned    any      `json:"pwned"`
		Scripts  int      `json:"scripts"`
	}](fuzzHarness+"("+string(names)+")", chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d malformed cases; slowest %d ms (%s)", got.Cases, got.Slowest, got.SlowCase)
	if got.NBad > 0 {
		t.Errorf("%d cases broke a renderer:\n%s", got.NBad, strings.Join(got.Bad, "\n"))
	}
	if got.Pwned != nil || got.Scripts != 0 {
		t.Errorf("markup ran: pwned %v, %d scripts", got.Pwned, got.Scripts)
	}
	if got.Slowest > 5000 {
		t.Errorf("a malformed case took %d ms: %s", got.Slowest, got.SlowCase)
	}
	// The page still works: a real edit renders its diff.
	out := renderCalls(t, ctx, r.base, []corpusCall{{File: "f", Name: "Edit", Args: map[string]any{"file_path": "/a/b.go", "old_string": "one\ntwo", "new_string": "one\n2"}, Status: "done"}})
	if !slices.Equal(out[0].Adds, []string{"2"}) || !slices.Equal(out[0].Dels, []string{"two"}) {
		t.Errorf("after the malformed cases, an edit shows %+v", out[0])
	}
}

// openAllTools opens every tool card and waits until each has its body.
func openAllTools(t *testing.T, ctx context.Context) {
	t.Helper()
	waitJS(t, ctx, "every tool card open", `(() => { const ds = [...document.querySelectorAll('details.sub, details.tool')]; for (const d of ds) d.open = true;
		return [...document.querySelectorAll('details.tool')].every((d) => d.querySelector('.tool-body')) })()`)
}

// shoot scrolls the element matched by sel to the top and takes a screenshot.
func shoot(t *testing.T, ctx context.Context, sel, name string) {
	t.Helper()
	if !eval[bool](t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.scrollIntoView({ block: 'start' }); scrollBy(0, -100); return true })()`, sel)) {
		t.Fatalf("nothing matches %s for the screenshot %s", sel, name)
	}
	screenshot(t, ctx, name)
}

// The bundled demo session, replayed and opened on a phone: its edits show
// as diffs whose line numbers match the file as Claude read it, its
// commands as titles with their output and exit code, its Grep as matches
// counted, its Read with line numbers, and the header shows its task list
// (three tasks, all done). Screenshots of each are left for people.
func TestAppToolCardsDemo(t *testing.T) {
	path, err := demo.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	calls := corpusCalls(t, filepath.Dir(path)) // the session and its subagent
	r := startAppRelay(t)
	id, _ := r.replay(t, path)
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	showAll(t, ctx)

	// The task list in the header.
	var subjects []string
	for _, c := range calls {
		if c.Name == "TaskCreate" {
			subjects = append(subjects, "completed:"+str(c.Args["subject"]))
		}
	}
	waitJS(t, ctx, "the task list in the header", `!document.querySelector('.task-strip').hidden`)
	if p := eval[string](t, ctx, `document.querySelector('.task-strip .progress').textContent`); p != "Tasks · 3 of 3 done" {
		t.Errorf("task strip says %q", p)
	}
	click(t, ctx, ".task-strip > summary")
	if got := eval[[]string](t, ctx, `[...document.querySelectorAll('.task-strip .task-item')].map((e) => e.dataset.status + ':' + e.textContent)`); !slices.Equal(got, subjects) {
		t.Errorf("task strip lists %q, want %q", got, subjects)
	}
	screenshot(t, ctx, "tools-tasks-phone")
	click(t, ctx, ".task-strip > summary")

	openAllTools(t, ctx)
	// Edits: every removed and context line carries the number it has in
	// the file Claude read before.
	reads := map[string][]string{}
	for _, c := range calls {
		switch c.Name {
		case "Read":
			var lines []string
			for _, l := range strings.Split(c.Result, "\n") {
				n, text, ok := strings.Cut(l, "\t")
				if !ok || strings.TrimSpace(n) != fmt.Sprint(len(lines)+1) {
					break
				}
				lines = append(lines, text)
			}
			reads[str(c.Args["file_path"])] = lines
		case "Edit":
			file := str(c.Args["file_path"])
			rows := eval[[][]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll('details.tool[data-call=%q] .diff .dl:not(.skip)')].map((r) => [r.dataset.op, ...[...r.querySelectorAll('.ln')].map((l) => l.textContent), r.querySelector('.tx').textContent])`, c.Call))
			if len(rows) == 0 {
				t.Fatalf("edit of %s: no diff", file)
			}
			var adds, dels []string
			for _, row := range rows {
				if len(row) != 4 {
					t.Fatalf("edit of %s: a row without line numbers: %q", file, row)
				}
				if row[0] == "+" {
					adds = append(adds, row[3])
					continue
				}
				if row[0] == "-" {
					dels = append(dels, row[3])
				}
				var n int
				fmt.Sscan(row[1], &n)
				if lines := reads[file]; n < 1 || n > len(lines) || lines[n-1] != row[3] {
					t.Errorf("edit of %s: line %s %q is not that line of the file", file, row[1], row[3])
				}
			}
			checkDiff(t, "edit of "+file, [][2]string{{str(c.Args["old_string"]), str(c.Args["new_string"])}}, adds, dels)
		}
	}
	shoot(t, ctx, `details.tool[data-tool="Edit"]`, "tools-edit-phone")

	// Commands: the command is the title; output and exit code show.
	bash := eval[[]string](t, ctx, `[...document.querySelectorAll('details.tool[data-tool="Bash"]')].map((d) => d.querySelector('summary .title').textContent + '|' + d.querySelector('.exit')?.textContent + '|' + d.querySelector('pre.term')?.textContent)`)
	var want []string
	for _, c := range calls {
		if c.Name == "Bash" {
			out := c.Result
			if lines := strings.Split(out, "\n"); len(lines) > 28 { // folded
				out = strings.Join(lines[:24], "\n")
			}
			want = append(want, str(c.Args["command"])+"|exit 0|"+out)
		}
	}
	slices.Sort(bash) // the subagent's command is in another file
	slices.Sort(want)
	if !slices.Equal(bash, want) {
		t.Errorf("commands show\n%q\nwant\n%q", bash, want)
	}
	shoot(t, ctx, `details.tool[data-tool="Bash"]`, "tools-bash-phone")

	// Grep: matches counted; Read: lines numbered.
	for _, c := range calls {
		switch c.Name {
		case "Grep":
			n := len(strings.Split(strings.TrimSpace(c.Result), "\n"))
			label := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('details.tool[data-call=%q] .label').textContent`, c.Call))
			if !strings.HasPrefix(label, fmt.Sprintf("%d matches in ", n)) {
				t.Errorf("grep: %q, want %d matches", label, n)
			}
		case "Read":
			got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('details.tool[data-call=%q] .gutter').textContent.split('\n').length + ' ' + document.querySelector('details.tool[data-call=%q] summary .fname').textContent`, c.Call, c.Call))
			if want := fmt.Sprint(len(reads[str(c.Args["file_path"])]), " ", filepath.Base(str(c.Args["file_path"]))); got != want {
				t.Errorf("read: %q, want %q", got, want)
			}
		}
	}
	shoot(t, ctx, `details.tool[data-tool="Grep"]`, "tools-grep-phone")
	shoot(t, ctx, `details.tool[data-tool="Read"]`, "tools-read-phone")
	shoot(t, ctx, `details.tool[data-tool="TaskUpdate"]`, "tools-taskupdate-phone")
	if w := eval[int](t, ctx, `document.scrollingElement.scrollWidth - innerWidth`); w > 0 {
		t.Errorf("page wider than the screen by %dpx", w)
	}
}

// toolStart is the tool-call-start envelope of a call in turn ct<turn>.
func toolStart(tag, turn, call, name string, args map[string]any) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id":"c%s","time":%d,"role":"agent","turn":"ct%s","ev":{"t":"tool-call-start","call":%q,"name":%q,"title":"%s call","description":"%s call","args":%s}}`,
		tag, time.Now().UnixMilli(), turn, call, name, name, name, a)
}

// Permission requests show what is asked before Allow, from the full input
// of the tool call they name (the session list cuts long inputs): an Edit
// its diff, a plan its Markdown with Approve / Keep planning, a question
// its options as buttons whose choice reaches the CLI as the answer.
func TestAppPermissionShowsTool(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"cwd": "/home/dev/project", "mode": "remote", "status": "idle"})
	// An edit whose input is over the list's 2 KiB: the list keeps only its path.
	var oldS, newS strings.Builder
	for i := range 80 {
		fmt.Fprintf(&oldS, "\tline %d of the old body\n", i)
		if i == 41 {
			newS.WriteString("\tthe new line forty-one\n")
			continue
		}
		fmt.Fprintf(&newS, "\tline %d of the old body\n", i)
	}
	plan := "# Add the shout flag\n\n## Steps\n1. Parse `--shout`\n2. Upper-case the greeting\n\n## Tests\n- shout on and off"
	question := map[string]any{"question": "Which colour?", "header": "Colour", "multiSelect": false,
		"options": []map[string]any{{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}}}
	cli.envelopes(id, fmt.Sprintf(`{"id":"cpas","time":%d,"role":"agent","turn":"ctpa","ev":{"t":"turn-start"}}`, time.Now().UnixMilli()),
		toolStart("pa", "pa", "toolu_perm_edit", "Edit", map[string]any{"file_path": "/home/dev/project/main.go", "old_string": oldS.String(), "new_string": newS.String()}),
		toolStart("pb", "pa", "toolu_perm_plan", "ExitPlanMode", map[string]any{"plan": plan}),
		toolStart("pc", "pa", "toolu_perm_ask", "AskUserQuestion", map[string]any{"questions": []any{question}}))
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-edit", "tool": "Edit", "call": "toolu_perm_edit", "input": map[string]any{"file_path": "/home/dev/project/main.go", "old_string": oldS.String(), "new_string": newS.String()}},
	}})
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the edit request", `!!document.querySelector('.perm[data-request="req-edit"] .diff')`)
	rows := eval[[]string](t, ctx, `[...document.querySelectorAll('.perm .diff .dl:not(.skip)')].map((r) => r.dataset.op + r.querySelector('.tx').textContent)`)
	if !slices.Contains(rows, "-\tline 41 of the old body") || !slices.Contains(rows, "+\tthe new line forty-one") || len(rows) != 8 {
		t.Errorf("the request's diff: %q", rows)
	}
	screenshot(t, ctx, "permission-edit-phone")
	click(t, ctx, `.perm[data-request="req-edit"] .perm-actions button.allow`)
	if c := cli.command(protocol.StatusDone, ""); c.RequestID != "req-edit" || !c.Allow {
		t.Fatalf("answer %+v", c)
	}

	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-plan", "tool": "ExitPlanMode", "call": "toolu_perm_plan", "input": map[string]any{"plan": plan[:20]}},
	}})
	waitJS(t, ctx, "the plan request", `!!document.querySelector('.perm[data-request="req-plan"] .plan')`)
	got := eval[[]string](t, ctx, `[...document.querySelectorAll('.perm .plan h2, .perm .plan h3, .perm .perm-actions button')].map((e) => e.textContent)`)
	if want := []string{"Add the shout flag", "Steps", "Tests", "Keep planning", "Approve"}; !slices.Equal(got, want) {
		t.Errorf("plan request shows %q, want %q", got, want)
	}
	screenshot(t, ctx, "permission-plan-phone")
	click(t, ctx, `.perm[data-request="req-plan"] .perm-actions button.allow`)
	if c := cli.command(protocol.StatusDone, ""); c.RequestID != "req-plan" || !c.Allow {
		t.Fatalf("answer %+v", c)
	}

	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-ask", "tool": "AskUserQuestion", "call": "toolu_perm_ask", "input": map[string]any{"questions": []any{question}}},
	}})
	waitJS(t, ctx, "the question", `document.querySelectorAll('.perm[data-request="req-ask"] .options button').length === 2`)
	screenshot(t, ctx, "permission-question-phone")
	click(t, ctx, `.perm[data-request="req-ask"] .options button:nth-child(2)`)
	c := cli.command(protocol.StatusDone, "")
	var in struct{ Answers map[string]string }
	json.Unmarshal(c.Input, &in)
	if c.RequestID != "req-ask" || !c.Allow || in.Answers["Which colour?"] != "Blue" {
		t.Fatalf("answer %+v (input %s)", c, c.Input)
	}
}

// env is one envelope (JSON) of the session protocol at time ms.
func env(id string, ms int64, role, turn, ev string) string {
	s := fmt.Sprintf(`{"id":%q,"time":%d,"role":%q`, id, ms, role)
	if turn != "" {
		s += fmt.Sprintf(`,"turn":%q`, turn)
	}
	return s + `,"ev":` + ev + `}`
}

func textEv(s string) string {
	b, _ := json.Marshal(s)
	return `{"t":"text","text":` + string(b) + `}`
}

// A recorded session reads as what it is: Claude Code's markup in user
// records shows as chips (a slash command with its arguments, its output,
// an editor selection, a system reminder), never as tags; a turn's
// duration runs from its prompt (a turn cancelled 2.5 s after the prompt
// says 2.5s, not the 500 ms between its first and last envelope); the last
// turn, left open by the file, says the recording ends there (no spinner);
// the prompt box is off, since no machine runs the session; the context
// meter is hidden without usage.
func TestAppRecordingIsHonest(t *testing.T) {
	r := startAppRelay(t)
	const id = "0c0c0c0c-1111-4222-8333-444444444444"
	cli := dialCLI(t, r)
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	cli.envelopes(id,
		env("cm1", t0-20, "user", "", textEv("<command-message>model is running…</command-message>\n<command-name>/model</command-name>\n<command-args>opus</command-args>")),
		env("cm2", t0-10, "user", "", textEv("<local-command-stdout>Set model to opus</local-command-stdout>")),
		env("cm3", t0, "user", "", textEv("<ide_selection>The user selected the lines 12 to 40 from /home/dev/project/file.go:\nfunc main() {}\n\nThis may or may not be related.</ide_selection>\nexplain this\n<system-reminder>Do not mention this.</system-reminder>")),
		env("cs1", t0+2000, "agent", "ct1", `{"t":"turn-start"}`),
		env("ca1", t0+2100, "agent", "ct1", textEv("Looking at it")),
		env("ce1", t0+2500, "agent", "ct1", `{"t":"turn-end","status":"cancelled"}`),
		env("cm4", t0+5000, "user", "", textEv("go on")),
		env("cs2", t0+6000, "agent", "ct2", `{"t":"turn-start"}`),
		env("ca2", t0+6100, "agent", "ct2", textEv("Continuing with the file")),
	)
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	text := eval[string](t, ctx, `document.querySelector('.blocks').innerText`)
	for _, tag := range []string{"<command-", "<local-command", "<ide_selection", "<system-reminder", "Do not mention"} {
		if strings.Contains(text, tag) {
			t.Errorf("the page shows %q:\n%s", tag, text)
		}
	}
	chips := eval[[]string](t, ctx, `[...document.querySelectorAll('.markup-chips .mchip')].map((c) => c.dataset.kind + ':' + (c.querySelector('summary') || c).textContent)`)
	if want := []string{"command:/model opus", "output:Set model to opus", "selection:selection in file.go:12-40", "reminder:system reminder"}; !slices.Equal(chips, want) {
		t.Errorf("chips %q, want %q", chips, want)
	}
	if users := eval[[]string](t, ctx, `[...document.querySelectorAll('.msg.user .bubble')].map((b) => b.textContent)`); !slices.Equal(users, []string{"explain this", "go on"}) {
		t.Errorf("prompts %q", users)
	}
	footers := eval[[]string](t, ctx, `[...document.querySelectorAll('.turn')].map((t) => t.dataset.status + ':' + t.querySelector('.turn-end').textContent + ':' + !!t.querySelector('.turn-end .spinner'))`)
	if want := []string{"cancelled:Cancelled2.5s:false", "open:The recording ends here:false"}; !slices.Equal(footers, want) {
		t.Errorf("turn footers %q, want %q", footers, want)
	}
	if got := eval[string](t, ctx, `(() => { const i = document.querySelector('.composer textarea'); return i.disabled + ':' + i.placeholder + ':' + document.querySelector('.meter').hidden })()`); got != "true:A recording: it takes no prompts:true" {
		t.Errorf("composer and meter: %s", got)
	}
	screenshot(t, ctx, "recording-chips-phone")
}

// A permission card takes a reason for a denial, which reaches the CLI, and
// an edited input before allowing (a command as text); what is being typed
// stays when the session's state is announced again meanwhile.
func TestAppPermissionDenyReasonAndEdit(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	perm := func(req, cmd string) {
		cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
			{"id": req, "tool": "Bash", "input": map[string]any{"command": cmd, "description": "Clean"}}}})
	}
	perm("req-a", "rm -rf build")
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the request", `!!document.querySelector('.perm[data-request="req-a"]')`)
	must(t, ctx, chromedp.Click(chromedp.CSS(`.perm button.deny-why`)), typeInto(`.perm .perm-reason-text`, "keep the cache"))
	perm("req-a", "rm -rf build") // announced again while typing
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "model": "opus", "permissions": []map[string]any{
		{"id": "req-a", "tool": "Bash", "input": map[string]any{"command": "rm -rf build", "description": "Clean"}}}})
	screenshot(t, ctx, "permission-reason-phone")
	must(t, ctx, typeInto(`.perm .perm-reason-text`, " please"), chromedp.Click(chromedp.CSS(`.perm-reason button.deny`)))
	if c := cli.command(protocol.StatusDone, ""); c.RequestID != "req-a" || c.Allow || c.Reason != "keep the cache please" {
		t.Fatalf("answer %+v", c)
	}

	perm("req-b", "rm -rf build")
	waitJS(t, ctx, "the second request", `!!document.querySelector('.perm[data-request="req-b"]')`)
	click(t, ctx, `.perm[data-request="req-b"] button.edit-first`)
	eval[bool](t, ctx, `(() => { const ta = document.querySelector('.perm[data-request="req-b"] .perm-edit-text'); ta.value = 'rm -rf build/tmp'; return true })()`)
	screenshot(t, ctx, "permission-edit-input-phone")
	click(t, ctx, `.perm[data-request="req-b"] .perm-edit button.allow`)
	c := cli.command(protocol.StatusDone, "")
	var in struct{ Command, Description string }
	json.Unmarshal(c.Input, &in)
	if c.RequestID != "req-b" || !c.Allow || in.Command != "rm -rf build/tmp" || in.Description != "Clean" {
		t.Fatalf("answer %+v (input %s)", c, c.Input)
	}
}
