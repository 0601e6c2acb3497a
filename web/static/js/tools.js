// Tool-aware rendering of tool calls, for cards in the conversation and for
// permission requests alike: diffs for edits, commands and their output,
// file names first, checklists, plans, questions, MCP arguments. Inputs are
// untrusted and may be malformed: every renderer reads fields through
// str/arr/obj, and a renderer that throws falls back to the JSON view.

import { h } from './dom.js';
import { highlight } from './highlight.js';
import { renderMarkdown, safeURL } from './markdown.js';
import { renderAnsi, stripAnsi } from './ansi.js';
import { lineDiff, renderDiff, splitLines } from './diff.js';
import { duration, oneLine } from './format.js';
import { copyable } from './copy.js';

// FOLD_LINES is how many lines of tool output show before "Show all".
export const FOLD_LINES = 24;
// MAX_RENDER is the most characters of one input field or output rendered
// richly; the rest is cut, with a note.
export const MAX_RENDER = 200000;
// MAX_TABLE_ROWS is the most argument rows an MCP table shows.
export const MAX_TABLE_ROWS = 60;

const str = (v) => (typeof v === 'string' ? v : '');
const arr = (v) => (Array.isArray(v) ? v : []);
const obj = (v) => (v && typeof v === 'object' && !Array.isArray(v) ? v : {});
const cut = (s) => (s.length > MAX_RENDER ? s.slice(0, MAX_RENDER) : s);

/** baseOf and dirOf split a path into its folder and file name. */
export function splitPath(p) {
  const s = String(p ?? '').replace(/[\\/]+$/, '');
  const i = Math.max(s.lastIndexOf('/'), s.lastIndexOf('\\'));
  return i < 0 ? { dir: '', name: s } : { dir: s.slice(0, i + 1), name: s.slice(i + 1) };
}

/** foldMiddle shortens s to max characters by cutting its middle. */
export function foldMiddle(s, max = 40) {
  const t = String(s ?? '');
  if (t.length <= max) return t;
  const keep = max - 1;
  const head = Math.ceil(keep * 0.4);
  return t.slice(0, head) + '…' + t.slice(t.length - (keep - head));
}

const home = (p) => String(p).replace(/^\/(home|Users)\/[^/]+/, '~').replace(/^\/root(?=\/|$)/, '~');

/** fileLabel shows a path as its file name, then its folder folded in the middle. */
export function fileLabel(path, max = 34) {
  const { dir, name } = splitPath(path);
  return h('span', { class: 'file-label', title: path },
    h('span', { class: 'fname', text: name || path }),
    dir ? h('span', { class: 'fdir', text: foldMiddle(home(dir), max) }) : null);
}

const LANG_BY_EXT = {
  go: 'go', js: 'js', mjs: 'js', cjs: 'js', jsx: 'js', ts: 'ts', tsx: 'ts', py: 'py', rs: 'rust', sh: 'sh', bash: 'sh', zsh: 'sh',
  json: 'json', yaml: 'yaml', yml: 'yaml', sql: 'sql', css: 'css', scss: 'css', c: 'c', h: 'c', cc: 'c', cpp: 'c', hpp: 'c',
  java: 'java', kt: 'java', swift: 'java', cs: 'java', scala: 'java', rb: 'ruby', toml: 'toml', ex: 'ruby', exs: 'ruby', mod: 'go',
};

/** langOf is the highlighter language for a file name ('' for plain text). */
export function langOf(path) {
  const { name } = splitPath(path);
  if (/^(Makefile|Dockerfile)$/i.test(name)) return 'sh';
  const m = /\.([A-Za-z0-9]+)$/.exec(name);
  return m ? LANG_BY_EXT[m[1].toLowerCase()] || '' : '';
}

function code(text, lang, cls = '') {
  const c = h('code', lang ? { 'data-lang': lang } : null);
  c.append(lang ? highlight(text, lang) : document.createTextNode(text));
  return h('pre', { class: ('code ' + cls).trim() }, c);
}

// folded shows the first FOLD_LINES lines of a long text, with a button for
// the rest; render turns a text into nodes. Its copy button (labelled
// copy) copies the whole text, plain.
function folded(text, render, cls, copy, plain = text) {
  const lines = text.split('\n');
  const pre = h('pre', { class: ('code ' + cls).trim() });
  const body = h('code');
  pre.append(body);
  if (lines.length <= FOLD_LINES + 4) { body.append(render(text)); return copyable(pre, copy, plain); }
  body.append(render(lines.slice(0, FOLD_LINES).join('\n')));
  const more = h('button', { class: 'show-all', type: 'button', text: `Show all ${lines.length} lines`, onclick: () => { body.replaceChildren(render(text)); more.remove(); } });
  return h('div', { class: 'fold' }, copyable(pre, copy, plain), more);
}

// numbered parses `cat -n` output as Read returns it ("  12→text" or
// "12\ttext"): [{n, text}] for the leading lines that have a number.
export function numbered(result) {
  const out = [];
  for (const l of String(result ?? '').split('\n')) {
    const m = /^\s*(\d+)(?:→|\t)(.*)$/.exec(l);
    if (!m) break;
    out.push({ n: parseInt(m[1], 10), text: m[2] });
  }
  return out;
}

// --- what the session knows about files -----------------------------------

const EDITS = new Set(['Edit', 'MultiEdit', 'Write', 'NotebookEdit']);

// lastRead returns the latest Read of path before the call `before` (a tool
// item) with no edit of the file between: its numbered lines, and whether
// it holds the whole file.
function lastRead(model, path, before) {
  if (!model?.calls || !path) return null;
  let found = null;
  for (const t of model.calls.values()) {
    if (t === before) break;
    const a = obj(t.args);
    if (str(a.file_path) !== path) continue;
    if (EDITS.has(t.name)) found = null;
    else if (t.name === 'Read' && t.status === 'done') {
      const lines = numbered(t.result);
      if (lines.length) found = { lines, whole: !t.truncated && a.offset == null && a.limit == null && lines[0].n === 1 && !/^\s*\d+(?:→|\t)/m.test(String(t.result).split('\n').slice(lines.length).join('\n')) };
    }
  }
  return found;
}

// editStart finds where old_string starts in the file (1-based) from the
// edit's own result (a `cat -n` snippet of the new file) or from an
// earlier Read; null when neither tells.
function editStart(model, t, path, oldS, newS) {
  const firstOf = (s) => splitLines(s).findIndex((l) => l.trim() !== '');
  const res = numbered(String(t?.result ?? '').replace(/^[\s\S]*?snippet of the edited file:\n/, ''));
  const ni = firstOf(newS);
  if (res.length && ni >= 0) {
    const want = splitLines(newS)[ni];
    const hit = res.find((r) => r.text === want);
    if (hit) return hit.n - ni;
  }
  const read = lastRead(model, path, t);
  const oi = firstOf(oldS);
  if (read && oi >= 0) {
    const ol = splitLines(oldS);
    for (let i = 0; i < read.lines.length; i++) {
      if (read.lines[i].text !== ol[oi]) continue;
      let ok = true;
      for (let k = oi; k < ol.length && ok; k++) ok = i + k - oi >= read.lines.length || read.lines[i + k - oi].text === ol[k];
      if (ok) return read.lines[i].n - oi;
    }
  }
  return null;
}

const pathLine = (p) => (str(p) ? h('div', { class: 'path', text: home(str(p)) }) : null);

// --- renderers ----------------------------------------------------------------

// Each renderer: {title(args, t) -> node or text, body(args, t, ctx) -> nodes
// (the input, shown in a card and in a permission request), result(t) ->
// nodes or null for the default}.
const R = {};

function editDiff(args, t, ctx, oldS, newS) {
  const start = editStart(ctx.model, t, str(args.file_path), oldS, newS);
  return renderDiff(oldS, newS, { oldStart: start, newStart: start });
}

R.Edit = {
  title: (a) => fileLabel(str(a.file_path)),
  body(a, t, ctx) {
    const d = editDiff(a, t, ctx, cut(str(a.old_string)), cut(str(a.new_string)));
    return [pathLine(a.file_path), h('div', { class: 'diff-head' }, h('span', { class: 'add-n', text: '+' + d.added }), h('span', { class: 'del-n', text: '−' + d.removed }),
      a.replace_all === true ? h('span', { class: 'chip', text: 'every occurrence' }) : null), d.el];
  },
  result: (t) => (t.status === 'failed' ? null : []),
};

R.MultiEdit = {
  title: (a) => fileLabel(str(a.file_path)),
  body(a, t, ctx) {
    const edits = arr(a.edits).map(obj);
    if (!edits.length) return [pathLine(a.file_path), h('div', { class: 'meta', text: 'No edits.' })];
    return [pathLine(a.file_path), ...edits.map((e, i) => {
      const d = editDiff(a, t, ctx, cut(str(e.old_string)), cut(str(e.new_string)));
      return h('details', { class: 'edit-part', open: true },
        h('summary', null, h('span', { text: `Edit ${i + 1} of ${edits.length}` }), h('span', { class: 'add-n', text: '+' + d.added }), h('span', { class: 'del-n', text: '−' + d.removed })),
        d.el);
    })];
  },
  result: (t) => (t.status === 'failed' ? null : []),
};

R.Write = {
  title: (a) => fileLabel(str(a.file_path)),
  body(a, t, ctx) {
    const path = str(a.file_path);
    const content = cut(str(a.content));
    const head = pathLine(path);
    const read = lastRead(ctx.model, path, t);
    if (read?.whole) {
      const d = renderDiff(read.lines.map((l) => l.text).join('\n'), content, { oldStart: 1, newStart: 1 });
      return [head, h('div', { class: 'diff-head' }, h('span', { class: 'add-n', text: '+' + d.added }), h('span', { class: 'del-n', text: '−' + d.removed }), h('span', { class: 'meta', text: 'against the file as read before' })), d.el];
    }
    const n = splitLines(content).length;
    return [head, h('div', { class: 'diff-head' }, h('span', { class: 'meta', text: `${n} line${n === 1 ? '' : 's'}` })),
      folded(content, (s) => highlight(s, langOf(path)), 'file-content', 'Copy content')];
  },
  result: (t) => (t.status === 'failed' ? null : []),
};

// notebookCell is a cell's source as the last Read of the notebook before
// t showed it (Claude Code reads a notebook as <cell id="…"> blocks), or
// null.
function notebookCell(model, path, id, before) {
  if (!model?.calls || !path || !id) return null;
  let found = null;
  for (const t of model.calls.values()) {
    if (t === before) break;
    const a = obj(t.args);
    if (str(a.file_path) !== path && str(a.notebook_path) !== path) continue;
    if (t.name === 'NotebookEdit') found = null;
    else if (t.name === 'Read' && t.status === 'done' && !t.truncated) {
      const text = String(t.result ?? '');
      const open = `<cell id="${id}">`;
      const i = text.indexOf(open);
      const j = i < 0 ? -1 : text.indexOf(`</cell id="${id}">`, i);
      found = j < 0 ? null : text.slice(i + open.length, j).replace(/<cell_type>[^<]*<\/cell_type>/g, '').replace(/^\n+|\n+$/g, '');
    }
  }
  return found;
}

R.NotebookEdit = {
  title: (a) => fileLabel(str(a.notebook_path)),
  body(a, t, ctx) {
    const path = str(a.notebook_path);
    const mode = ['replace', 'insert', 'delete'].includes(str(a.edit_mode)) ? str(a.edit_mode) : 'replace';
    const kind = str(a.cell_type) === 'markdown' ? 'markdown' : (str(a.cell_type) === 'code' ? 'code' : '');
    const id = str(a.cell_id);
    const cell = id ? `cell ${oneLine(id, 40)}` : 'the first cell';
    const what = {
      replace: `Replace ${cell}${kind ? ` (${kind})` : ''}`,
      insert: `Insert a ${kind || 'code'} cell ${id ? `after ${cell}` : 'at the top'}`,
      delete: `Delete ${cell}`,
    }[mode];
    const src = cut(str(a.new_source));
    const parts = [pathLine(path), h('div', { class: 'notebook-op', text: what })];
    if (mode === 'delete') return parts;
    const before = mode === 'replace' ? notebookCell(ctx?.model, path, id, t) : null;
    if (before != null) {
      const d = renderDiff(before, src, { oldStart: 1, newStart: 1 });
      parts.push(h('div', { class: 'diff-head' }, h('span', { class: 'add-n', text: '+' + d.added }), h('span', { class: 'del-n', text: '−' + d.removed }), h('span', { class: 'meta', text: 'against the cell as read before' })), d.el);
    } else if (kind === 'markdown') {
      parts.push(h('div', { class: 'md notebook-md' }, renderMarkdown(src)));
    } else {
      parts.push(folded(src, (s) => highlight(s, 'py'), 'file-content', 'Copy cell'));
    }
    return parts;
  },
  result: (t) => (t.status === 'failed' ? null : []),
};

// exitCode reads the exit code Claude Code puts in a failed command's result.
export function exitCode(t) {
  const m = /^Exit code (\d+)/m.exec(String(t?.result ?? ''));
  return m ? parseInt(m[1], 10) : null;
}

// patchFiles reads a Codex apply_patch text ("*** Begin Patch") into its
// files: {op, path, moveTo, old, new}, old and new the hunks' sides (the
// patch has no line numbers).
export function patchFiles(text) {
  const files = [];
  let f = null;
  for (const l of String(text ?? '').split('\n').slice(0, 100000)) {
    const m = /^\*\*\* (Add|Update|Delete) File: (.*)$/.exec(l);
    if (m) {
      f = { op: m[1].toLowerCase(), path: m[2].trim(), moveTo: '', old: [], new: [] };
      files.push(f);
    } else if (!f || l.startsWith('*** End Patch')) {
      if (l.startsWith('*** End Patch')) f = null;
    } else if (l.startsWith('*** Move to: ')) f.moveTo = l.slice(13).trim();
    else if (l.startsWith('@@') && f.old.length + f.new.length) {
      f.old.push('⋯');
      f.new.push('⋯');
    } else if (l[0] === '+') f.new.push(l.slice(1));
    else if (l[0] === '-') f.old.push(l.slice(1));
    else if (l[0] === ' ') { f.old.push(l.slice(1)); f.new.push(l.slice(1)); }
  }
  return files;
}

// hunksDiff draws a protocol diff (tool-call-end's diff: hunks with line
// numbers) as numbered rows, hunk after hunk.
function hunksDiff(d) {
  const els = [];
  let added = 0;
  let removed = 0;
  for (const hk of arr(d.hunks).map(obj).slice(0, 64)) {
    const lines = arr(hk.lines).filter((l) => typeof l === 'string');
    const side = (c) => lines.filter((l) => l[0] === ' ' || l[0] === c).map((l) => l.slice(1)).join('\n');
    const r = renderDiff(cut(side('-')), cut(side('+')), { oldStart: Number.isSafeInteger(hk.oldStart) && hk.oldStart > 0 ? hk.oldStart : 1, newStart: Number.isSafeInteger(hk.newStart) && hk.newStart > 0 ? hk.newStart : 1 });
    els.push(r.el);
    added += r.added;
    removed += r.removed;
  }
  return { els, added, removed };
}

const PATCH_VERB = { add: 'Add', update: 'Edit', delete: 'Delete' };

// Codex's apply_patch: each file of the patch with its change; the file
// Codex numbered when it applied the patch (the end's diff) with its line
// numbers, the others as the patch gives them.
R.apply_patch = {
  title(a) {
    const files = arr(a.files).map(obj);
    if (files.length === 1) return fileLabel(str(files[0].moveTo) || str(files[0].path));
    return files.length ? `${files.length} files` : '';
  },
  body(a, t) {
    const d = t && t.status === 'done' && isObject(t.diff) ? t.diff : null;
    return patchFiles(str(a.input)).slice(0, 100).map((f) => {
      const path = f.moveTo || f.path;
      const head = h('div', { class: 'diff-head' }, h('span', { class: 'chip', text: PATCH_VERB[f.op] || f.op }), fileLabel(path),
        f.moveTo ? h('span', { class: 'meta', text: 'moved from ' + f.path }) : null);
      if (f.op === 'delete') return h('div', { class: 'edit-part' }, head);
      if (d && (str(d.path) === path || str(d.path).endsWith('/' + path.replace(/^\.\//, '')))) {
        const r = hunksDiff(d);
        head.append(h('span', { class: 'add-n', text: '+' + r.added }), h('span', { class: 'del-n', text: '−' + r.removed }));
        return h('div', { class: 'edit-part', 'data-numbered': 'true' }, head, ...r.els);
      }
      const r = renderDiff(cut(f.old.join('\n')), cut(f.new.join('\n')), f.op === 'add' ? { oldStart: 1, newStart: 1 } : {});
      head.append(h('span', { class: 'add-n', text: '+' + r.added }), h('span', { class: 'del-n', text: '−' + r.removed }));
      return h('div', { class: 'edit-part' }, head, r.el);
    });
  },
  result: (t) => (t.status === 'failed' ? null : [h('div', { class: 'meta', text: String(t.result ?? '').trim() })]),
};

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

R.Bash = {
  title: (a) => h('span', { class: 'cmd-title', text: oneLine(str(a.command), 200) }),
  body(a) {
    return [
      str(a.description) ? h('div', { class: 'cmd-desc', text: str(a.description) }) : null,
      copyable(h('pre', { class: 'code cmd' }, h('code', null, h('span', { class: 'prompt', 'aria-hidden': 'true', text: '$ ' }), highlight(cut(str(a.command)), 'sh'))), 'Copy command', str(a.command)),
      a.run_in_background === true ? h('div', { class: 'meta', text: 'Runs in the background.' }) : null,
    ];
  },
  result(t) {
    const out = String(t.result ?? '');
    const code = exitCode(t);
    const parts = [h('div', { class: 'label out-label' }, t.status === 'failed' ? 'Output (failed)' : 'Output',
      code != null ? h('span', { class: 'exit bad', text: 'exit ' + code }) : t.status === 'done' ? h('span', { class: 'exit ok', text: 'exit 0' }) : null)];
    const shown = cut(out.replace(/^Exit code \d+\n?/, ''));
    if (out.trim()) parts.push(folded(shown, renderAnsi, 'result term' + (t.status === 'failed' ? ' error' : ''), 'Copy output', stripAnsi(shown)));
    else if (t.status !== 'running') parts.push(h('div', { class: 'meta', text: 'No output.' }));
    return parts;
  },
};

R.Read = {
  title: (a) => fileLabel(str(a.file_path)),
  body(a) {
    const from = Number.isFinite(a.offset) ? a.offset : null;
    const n = Number.isFinite(a.limit) ? a.limit : null;
    return [h('div', { class: 'path', text: str(a.file_path) }),
      from != null || n != null ? h('div', { class: 'meta', text: `Lines ${from ?? 1}–${n != null ? (from ?? 1) + n - 1 : 'end'}` }) : null];
  },
  result(t) {
    const lines = numbered(t.result);
    if (!lines.length || t.status === 'failed') return null;
    const lang = langOf(str(obj(t.args).file_path));
    const text = lines.map((l) => l.text).join('\n');
    const gutter = lines.map((l) => l.n).join('\n');
    return [h('div', { class: 'label', text: `${lines.length} line${lines.length === 1 ? '' : 's'} (${lines[0].n}–${lines[lines.length - 1].n})` }),
      copyable(h('div', { class: 'file-lines' }, h('pre', { class: 'gutter', 'aria-hidden': 'true', text: gutter }), code(text, lang, 'file-content')), 'Copy lines', text)];
  },
};

function pathResult(t, kind) {
  const r = String(t.result ?? '').trim();
  if (!r || t.status === 'failed') return null;
  const lines = r.split('\n').filter((l) => l.trim() && !/^Found \d+ files?/.test(l));
  const head = /^Found (\d+) (files?)/.exec(r);
  const files = lines.every((l) => /^(\/|~|\.|[A-Za-z]:\\)/.test(l) && !/:\d+:/.test(l));
  if (!files) return null;
  const n = head ? parseInt(head[1], 10) : lines.length;
  return [h('div', { class: 'label', text: `${n} ${kind}${n === 1 ? '' : 's'}` }),
    h('ul', { class: 'file-list' }, lines.slice(0, 200).map((l) => h('li', null, fileLabel(l.trim(), 48)))),
    lines.length > 200 ? h('div', { class: 'meta', text: `and ${lines.length - 200} more` }) : null];
}

function argRows(a, keys) {
  const rows = keys.filter((k) => a[k] != null && a[k] !== '').map((k) => h('div', { class: 'kv' }, h('span', { class: 'k', text: k }), h('span', { class: 'v', text: typeof a[k] === 'string' ? a[k] : JSON.stringify(a[k]) })));
  return rows.length ? h('div', { class: 'kvs' }, rows) : null;
}

R.Grep = {
  title: (a) => h('span', { class: 'pattern-title' }, h('span', { class: 'mono', text: oneLine(str(a.pattern), 120) }), str(a.path) ? h('span', { class: 'fdir', text: ' in ' + foldMiddle(home(str(a.path)), 30) }) : null),
  body: (a) => [argRows(a, ['pattern', 'path', 'glob', 'type', 'output_mode', '-i', '-n', '-A', '-B', '-C', 'multiline', 'head_limit'])],
  result(t) {
    const asFiles = pathResult(t, 'file');
    if (asFiles) return asFiles;
    const r = String(t.result ?? '');
    const lines = r.split('\n').filter((l) => l.trim());
    const hits = lines.map((l) => /^(.+?):(\d+):(.*)$/.exec(l));
    if (!lines.length || hits.some((m) => !m) || t.status === 'failed') return null;
    const files = new Set(hits.map((m) => m[1]));
    return [h('div', { class: 'label', text: `${hits.length} match${hits.length === 1 ? '' : 'es'} in ${files.size} file${files.size === 1 ? '' : 's'}` }),
      h('div', { class: 'matches' }, hits.slice(0, 300).map((m) => h('div', { class: 'match' }, h('span', { class: 'fname', text: splitPath(m[1]).name }), h('span', { class: 'ln', text: ':' + m[2] }), h('code', { text: m[3] }))))];
  },
};

R.Glob = {
  title: (a) => h('span', { class: 'pattern-title' }, h('span', { class: 'mono', text: oneLine(str(a.pattern), 120) }), str(a.path) ? h('span', { class: 'fdir', text: ' in ' + foldMiddle(home(str(a.path)), 30) }) : null),
  body: (a) => [argRows(a, ['pattern', 'path'])],
  result: (t) => pathResult(t, 'file'),
};

R.LS = {
  title: (a) => fileLabel(str(a.path)),
  body: (a) => [h('div', { class: 'path', text: str(a.path) }), argRows(a, ['ignore'])],
};

R.WebFetch = {
  title(a) {
    let u = null;
    try { u = new URL(str(a.url)); } catch { /* shown as given */ }
    return h('span', { class: 'file-label' }, h('span', { class: 'fname', text: u ? u.host : str(a.url) }), u ? h('span', { class: 'fdir', text: foldMiddle(u.pathname + u.search, 40) }) : null);
  },
  body(a) {
    const href = safeURL(str(a.url));
    return [h('div', { class: 'path' }, href ? h('a', { href, rel: 'noopener noreferrer', target: '_blank', text: str(a.url) }) : str(a.url)),
      str(a.prompt) ? h('div', { class: 'cmd-desc', text: str(a.prompt) }) : null];
  },
  result: (t) => (String(t.result ?? '').trim() && t.status !== 'failed' ? [h('div', { class: 'label', text: 'Result' }), h('div', { class: 'md web-result' }, renderMarkdown(cut(String(t.result))))] : null),
};

R.WebSearch = {
  title: (a) => oneLine(str(a.query), 120),
  body: (a) => [argRows(a, ['query', 'allowed_domains', 'blocked_domains'])],
};

const STATUS_LABEL = { pending: 'To do', in_progress: 'In progress', completed: 'Done' };

/** checklist renders tasks [{content, status, activeForm}] as a list. */
export function checklist(items) {
  return h('ul', { class: 'checklist' }, items.map((it) => {
    const st = ['pending', 'in_progress', 'completed'].includes(it.status) ? it.status : 'pending';
    return h('li', { class: 'task-item', 'data-status': st },
      h('span', { class: 'box', role: 'img', 'aria-label': STATUS_LABEL[st] }),
      h('span', { class: 'task-text', text: st === 'in_progress' && it.activeForm ? it.activeForm : it.content || '(untitled)' }));
  }));
}

function todos(a) {
  return arr(a.todos).map(obj).map((x) => ({ content: str(x.content), status: str(x.status), activeForm: str(x.activeForm) }));
}

function progress(items) {
  const done = items.filter((i) => i.status === 'completed').length;
  const now = items.find((i) => i.status === 'in_progress');
  return `${done} of ${items.length} done` + (now ? ' · ' + (now.activeForm || now.content) : '');
}

R.TodoWrite = {
  title: (a) => progress(todos(a)),
  body: (a) => [checklist(todos(a))],
  result: () => [],
};

R.TaskCreate = {
  title: (a) => str(a.subject) || 'New task',
  body: (a) => [h('div', { class: 'task-new' }, checklist([{ content: str(a.subject), status: 'pending' }])), str(a.description) ? h('div', { class: 'cmd-desc', text: str(a.description) }) : null],
  result: (t) => (t.status === 'failed' ? null : []),
};

R.TaskUpdate = {
  title(a, t, ctx) {
    const task = taskList(ctx.model, t)?.items.find((x) => x.id === String(a.taskId ?? ''));
    const st = str(a.status);
    return (task?.content || str(a.subject) || '#' + String(a.taskId ?? '?')) + (st ? ' → ' + (STATUS_LABEL[st] || st.replace('_', ' ')) : '');
  },
  body(a, t, ctx) {
    const list = taskList(ctx.model, t, true);
    return list?.items.length ? [h('div', { class: 'label', text: 'The task list after this' }), checklist(list.items)] : [argRows(a, Object.keys(a))];
  },
  result: (t) => (t.status === 'failed' ? null : []),
};

/**
 * taskList is the session's task list as of the call `upto` (included when
 * inclusive; the end when upto is null): from the last TodoWrite, or the
 * TaskCreate/TaskUpdate calls. {items: [{id, content, status, activeForm}]}
 * or null when the session has none.
 */
export function taskList(model, upto = null, inclusive = false) {
  if (!model?.calls) return null;
  let todo = null;
  const tasks = [];
  let kind = null;
  for (const t of model.calls.values()) {
    if (t === upto && !inclusive) break;
    if (t.status !== 'failed') {
      const a = obj(t.args);
      if (t.name === 'TodoWrite') {
        todo = todos(a).map((x, i) => ({ id: String(i + 1), ...x }));
        kind = 'todo';
      } else if (t.name === 'TaskCreate') {
        const m = /Task #(\S+) created/.exec(String(t.result ?? ''));
        tasks.push({ id: m ? m[1] : String(tasks.length + 1), content: str(a.subject), status: 'pending', activeForm: str(a.activeForm) });
        kind = 'task';
      } else if (t.name === 'TaskUpdate') {
        const i = tasks.findIndex((x) => x.id === String(a.taskId ?? ''));
        if (i >= 0) {
          if (a.status === 'deleted') tasks.splice(i, 1);
          else {
            if (str(a.status)) tasks[i].status = a.status;
            if (str(a.subject)) tasks[i].content = a.subject;
            if (str(a.activeForm)) tasks[i].activeForm = a.activeForm;
          }
        }
        kind = 'task';
      }
    }
    if (t === upto) break;
  }
  if (!kind) return null;
  return { items: kind === 'todo' ? todo : tasks };
}

/** taskProgress is "2 of 5 done · current task" for a list. */
export function taskProgress(items) { return progress(items); }

function planTitle(plan) {
  const m = /^\s{0,3}#{1,6}\s+(.+)$/m.exec(plan);
  return m ? m[1].replace(/#+\s*$/, '').trim() : oneLine(plan, 90) || 'Plan';
}

R.ExitPlanMode = {
  title: (a) => planTitle(str(a.plan)),
  body: (a) => [str(a.plan) ? h('div', { class: 'md plan' }, renderMarkdown(cut(str(a.plan)))) : h('div', { class: 'meta', text: 'No plan text.' })],
};

// answers reads AskUserQuestion's result: "question"="answer" pairs.
function answers(result) {
  const out = new Map();
  const re = /"((?:[^"\\]|\\.)*)"="((?:[^"\\]|\\.)*)"/g;
  let m;
  while ((m = re.exec(String(result ?? '')))) out.set(m[1], m[2]);
  return out;
}

R.AskUserQuestion = {
  title: (a) => oneLine(str(obj(arr(a.questions)[0]).question) || 'A question', 120),
  body(a, t, ctx) {
    const got = answers(t?.result);
    return arr(a.questions).map(obj).map((q) => {
      const question = str(q.question);
      const answer = got.get(question);
      const opts = arr(q.options).map(obj);
      return h('div', { class: 'question' },
        str(q.header) ? h('div', { class: 'label', text: str(q.header) }) : null,
        h('div', { class: 'q-text', text: question }),
        h('div', { class: 'options', role: 'group', 'aria-label': question || 'Options' }, opts.map((o) => {
          const label = str(o.label);
          return h('button', {
            class: 'option' + (answer === label ? ' chosen' : ''), type: 'button', disabled: !ctx.answer,
            'aria-pressed': answer != null ? String(answer === label) : null,
            onclick: ctx.answer ? () => ctx.answer({ ...a, answers: { [question]: label } }) : null,
          }, h('span', { class: 'opt-label', text: label }), str(o.description) ? h('span', { class: 'opt-desc', text: str(o.description) }) : null);
        })),
        answer != null && !opts.some((o) => str(o.label) === answer) ? h('div', { class: 'q-answer' }, 'Answered: ', h('b', { text: answer })) : null);
    });
  },
  result: (t) => (t.status === 'failed' ? null : []),
};

const reMCP = /^mcp__(.+?)__(.+)$/;

/** mcpName splits an MCP tool name: {server, tool}, or null. */
export function mcpName(name) {
  const m = reMCP.exec(String(name ?? ''));
  return m ? { server: m[1], tool: m[2] } : null;
}

const MCP = {
  title(a, t) {
    const m = mcpName(t.name);
    return h('span', { class: 'mcp-title' }, h('span', { class: 'chip', text: m.server }), ' ', oneLine(Object.values(a).find((v) => typeof v === 'string') || '', 80));
  },
  body(a, t) {
    const m = mcpName(t.name);
    const entries = Object.entries(a);
    return [h('div', { class: 'meta' }, 'Tool ', h('b', { class: 'mono', text: m.tool }), ' of the MCP server ', h('b', { class: 'mono', text: m.server })),
      entries.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'args-table' }, h('tbody', null, entries.slice(0, MAX_TABLE_ROWS).map(([k, v]) =>
        h('tr', null, h('th', { scope: 'row', text: k }), h('td', null, typeof v === 'string' ? oneLine(v, 2000) : h('code', { text: oneLine(JSON.stringify(v), 2000) }))))))) : h('div', { class: 'meta', text: 'No arguments.' }),
      entries.length > MAX_TABLE_ROWS ? h('div', { class: 'meta', text: `and ${entries.length - MAX_TABLE_ROWS} more` }) : null];
  },
};

function rendererOf(name) {
  if (Object.hasOwn(R, name)) return R[name];
  if (mcpName(name)) return MCP;
  return null;
}

// --- the generic (JSON) view, for tools without a renderer ----------------

function genericInput(args) {
  const parts = [];
  if (typeof args.command === 'string') parts.push(copyable(h('pre', { class: 'code cmd' }, h('code', { text: '$ ' + args.command })), 'Copy command', args.command));
  if (typeof args.file_path === 'string') parts.push(h('div', { class: 'path', text: args.file_path }));
  const rest = Object.fromEntries(Object.entries(args).filter(([k]) => !['command', 'file_path', 'description'].includes(k)));
  if (Object.keys(rest).length) parts.push(h('pre', { class: 'code args' }, h('code', { text: cut(JSON.stringify(rest, null, 2)) })));
  return parts;
}

function genericResult(t) {
  if (t.result != null && t.result !== '') {
    return [h('div', { class: 'label', text: t.status === 'failed' ? 'Error' : 'Result' }),
      copyable(h('pre', { class: 'code result' + (t.status === 'failed' ? ' error' : '') }, h('code', { text: stripAnsi(cut(String(t.result))) })), t.status === 'failed' ? 'Copy error' : 'Copy output', stripAnsi(cut(String(t.result))))];
  }
  return t.status === 'done' ? [h('div', { class: 'meta', text: 'No output.' })] : [];
}

// --- entry points -------------------------------------------------------------

/** toolTitle is the card's title: a node or text. */
export function toolTitle(t, model) {
  const a = obj(t.args);
  const r = rendererOf(t.name);
  try {
    const v = r?.title(a, t, { model });
    if (v instanceof Node || (typeof v === 'string' && v)) return v;
  } catch (e) {
    console.error(e);
  }
  if (typeof a.subject === 'string' && a.subject) return a.subject;
  if (t.title && t.title !== t.name + ' call') return t.title;
  const v = a.command ?? a.file_path ?? a.path ?? a.pattern ?? a.url ?? a.query ?? a.prompt;
  return typeof v === 'string' ? oneLine(v, 90) : t.title || '';
}

/** toolInput renders what a tool is asked to do (card and permission request). */
export function toolInput(name, args, ctx = {}, t = null) {
  const a = obj(args);
  const r = rendererOf(name);
  if (r) {
    try {
      return h('div', { class: 'tool-input', 'data-tool': name }, r.body(a, t || { name, args: a }, ctx));
    } catch (e) {
      console.error(e);
    }
  }
  return h('div', { class: 'tool-input generic' }, genericInput(a));
}

/**
 * previewNote says a result is a preview; when the relay keeps the whole
 * result, a button fetches it (ctx.showAll) and the card is drawn again
 * with it.
 */
function previewNote(t, ctx) {
  if (!t.truncated) return null;
  if (!(t.full > 0) || !ctx?.showAll) return h('div', { class: 'meta', text: 'Preview: the first 4 KB of the result.' });
  const size = t.full >= 1 << 20 ? (t.full / (1 << 20)).toFixed(1) + ' MB' : Math.ceil(t.full / 1024) + ' KB';
  const btn = h('button', { class: 'show-all', type: 'button', text: t.fullError ? 'Try again' : `Show all ${size}`,
    onclick: () => { btn.disabled = true; btn.textContent = 'Loading…'; ctx.showAll(t); } });
  return h('div', { class: 'meta preview-note' }, t.fullError ? `Could not load the whole result: ${t.fullError}. ` : 'Preview: the first 4 KB. ', btn);
}

/** toolBody renders a card's body: the input, then the result. */
export function toolBody(t, model, ctx) {
  const parts = [toolInput(t.name, t.args, { model }, t)];
  const r = rendererOf(t.name);
  let res = null;
  if (r?.result) {
    try { res = r.result(t); } catch (e) { console.error(e); res = null; }
  }
  parts.push(...(res || genericResult(t)));
  parts.push(previewNote(t, ctx));
  if (t.end && t.start) parts.push(h('div', { class: 'meta', text: 'Took ' + duration(t.end - t.start) }));
  return parts.filter(Boolean);
}

/** permissionLabels names a request's answers: plans are approved or kept. */
export function permissionLabels(tool) {
  return tool === 'ExitPlanMode' ? { allow: 'Approve', deny: 'Keep planning', verb: 'Approve the plan' } : { allow: 'Allow', deny: 'Deny', verb: null };
}

/** toolPreview is the short text under a closed card: changes or output. */
export function toolPreview(t) {
  const a = obj(t.args);
  if (t.status !== 'failed') {
    try {
      if (t.name === 'Edit' || t.name === 'MultiEdit') {
        const parts = t.name === 'Edit' ? [a] : arr(a.edits).map(obj);
        let add = 0;
        let del = 0;
        for (const e of parts) {
          const d = lineDiffCounts(str(e.old_string), str(e.new_string));
          add += d.added;
          del += d.removed;
        }
        return `+${add} −${del}`;
      }
      if (t.name === 'Write') return `${splitLines(str(a.content)).length} lines`;
      if (t.name === 'apply_patch') {
        let add = 0;
        let del = 0;
        for (const f of patchFiles(str(a.input))) {
          add += f.new.filter((l) => l !== '⋯').length;
          del += f.old.filter((l) => l !== '⋯').length;
        }
        return `+${add} −${del}`;
      }
      if (t.name === 'TodoWrite' || t.name === 'TaskCreate' || t.name === 'TaskUpdate' || t.name === 'ExitPlanMode') return '';
    } catch (e) {
      console.error(e);
    }
  }
  const r = stripAnsi(String(t.result ?? '')).trim();
  return r.split('\n').slice(0, 3).join('\n').slice(0, 300);
}

function lineDiffCounts(a, b) {
  if (a.length + b.length > MAX_RENDER) return { added: splitLines(b).length, removed: splitLines(a).length };
  return lineDiff(a, b);
}

/**
 * taskStrip is the session header's task list: a line with the progress
 * that opens on the checklist. update(model) redraws it (hidden while the
 * session has no list).
 */
export function taskStrip() {
  const sum = h('summary', null, h('span', { class: 'box', 'aria-hidden': 'true' }), h('span', { class: 'progress' }));
  const list = h('div', { class: 'strip-list' });
  const el = h('details', { class: 'task-strip', hidden: true }, sum, list);
  let last = '';
  return {
    el,
    update(model) {
      let tl = null;
      try { tl = taskList(model); } catch (e) { console.error(e); }
      const items = tl?.items || [];
      el.hidden = !items.length;
      const key = JSON.stringify(items);
      if (key === last) return;
      last = key;
      sum.querySelector('.progress').textContent = 'Tasks · ' + progress(items);
      el.dataset.done = String(items.length > 0 && items.every((i) => i.status === 'completed'));
      list.replaceChildren(checklist(items));
    },
  };
}

/**
 * permissionExtras are a permission card's second answers: deny with a
 * reason Claude reads, and edit the input before allowing (a command as
 * text, a plan as Markdown, anything else as JSON) unless the input was
 * clipped (too long to show whole: an edit would allow the part shown).
 * Codex's current approvals take no reason (docs/compatibility.md, "a
 * denial's reason"): what is written there is kept in the session as a
 * note, and the box says so; its older ones (execCommandApproval,
 * applyPatchApproval) pass the reason on, and the request says so
 * (reasonRead): then the box asks for a reason, as Claude's does.
 */
export function permissionExtras(tool, input, { allow, deny, clipped, agent = 'claude', reasonRead = false }) {
  const a = obj(input);
  const codex = agent === 'codex';
  const note = codex && !reasonRead;
  const reason = h('input', { type: 'text', class: 'perm-reason-text', enterkeyhint: 'send',
    placeholder: note ? 'Note for the session (Codex does not read it)' : 'Tell ' + (codex ? 'Codex' : 'Claude') + ' why, or what to do instead',
    'aria-label': note ? 'Note for the session, with the denial' : 'Reason for denying' });
  const denyForm = h('form', { class: 'perm-form perm-reason', hidden: true, onsubmit: (e) => { e.preventDefault(); deny(reason.value.trim()); } },
    reason, h('button', { class: 'deny', type: 'submit', text: 'Deny' }));
  const field = tool === 'Bash' ? 'command' : tool === 'ExitPlanMode' ? 'plan' : '';
  const ta = h('textarea', { class: 'perm-edit-text', rows: field === 'command' ? 3 : 8, 'aria-label': field ? 'Edited ' + field : 'Edited input (JSON)', spellcheck: 'false' });
  ta.value = field ? str(a[field]) : JSON.stringify(a, null, 2);
  const err = h('div', { class: 'perm-edit-error', role: 'alert', hidden: true });
  const editForm = h('form', {
    class: 'perm-form perm-edit', hidden: true,
    onsubmit: (e) => {
      e.preventDefault();
      let edited;
      if (field) edited = { ...a, [field]: ta.value };
      else {
        try { edited = JSON.parse(ta.value); } catch { edited = null; }
        if (!edited || typeof edited !== 'object' || Array.isArray(edited)) { err.hidden = false; err.textContent = 'The input must be a JSON object.'; return; }
      }
      allow(edited);
    },
  }, ta, err, h('button', { class: 'allow primary', type: 'submit', text: 'Allow edited' }));
  const toggle = (form, focus) => () => { form.hidden = !form.hidden; if (!form.hidden) focus.focus(); };
  return h('div', { class: 'perm-extras' },
    h('div', { class: 'perm-more' },
      h('button', { class: 'link deny-why', type: 'button', text: note ? 'Deny with a note…' : 'Deny with a reason…', onclick: toggle(denyForm, reason) }),
      tool === 'AskUserQuestion' || clipped ? null : h('button', { class: 'link edit-first', type: 'button', text: 'Edit, then allow…', onclick: toggle(editForm, ta) })),
    denyForm, clipped ? null : editForm);
}
