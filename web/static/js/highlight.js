// A small syntax highlighter: comments, strings, numbers, keywords and
// types for the languages Claude Code writes most, a generic fallback for
// the rest, and diffs by line. Output is spans of text nodes.

import { h } from './dom.js';

const words = (s) => new Set(s.split(' '));

const C_LIKE = 'if else for while do switch case default break continue return goto try catch finally throw new delete typeof instanceof void this super class extends implements interface enum struct union const static public private protected abstract final virtual override import export package from as in of let var function func fn def async await yield true false null nil undefined None True False self';
const LANGS = {
  go: { line: '//', block: true, kw: 'break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var true false nil iota', types: 'bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string uint uint8 uint16 uint32 uint64 uintptr any comparable', raw: '`' },
  js: { line: '//', block: true, kw: 'async await break case catch class const continue debugger default delete do else export extends finally for from function if import in instanceof let new of return static super switch this throw try typeof var void while with yield true false null undefined', types: 'Array Object String Number Boolean Promise Map Set Error JSON Math Date RegExp Symbol console window document', raw: '`' },
  ts: { line: '//', block: true, kw: 'abstract as async await break case catch class const continue declare default delete do else enum export extends finally for from function if implements import in infer instanceof interface is keyof let namespace new of private protected public readonly return static super switch this throw try type typeof var void while yield true false null undefined', types: 'string number boolean any unknown never object void Array Record Partial Promise Map Set', raw: '`' },
  py: { line: '#', kw: 'and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield True False None self', types: 'int float str bool list dict set tuple bytes object type Exception print len range' },
  rust: { line: '//', block: true, kw: 'as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while', types: 'i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize f32 f64 bool char str String Vec Option Result Box Some None Ok Err' },
  sh: { line: '#', kw: 'if then else elif fi for while until do done case esac in function return local export set unset echo cd exit source alias readonly shift trap', types: 'git go npm npx node make docker sudo grep sed awk cat ls rm mv cp mkdir curl' },
  json: { kw: 'true false null', keys: true },
  yaml: { line: '#', kw: 'true false null yes no on off', keys: true },
  sql: { line: '--', block: true, ci: true, kw: 'select from where and or not insert into values update set delete create table index view drop alter add primary key foreign references join left right inner outer on group by order having limit offset as distinct union all case when then else end null is in exists like between default unique begin commit rollback', types: 'integer int text real blob varchar char boolean timestamp date serial' },
  css: { block: true, kw: 'important', keys: false },
  c: { line: '//', block: true, kw: C_LIKE + ' sizeof typedef extern register volatile inline #include #define #ifdef #ifndef #endif', types: 'int char float double long short unsigned signed bool void size_t auto std string vector' },
  java: { line: '//', block: true, kw: C_LIKE + ' throws synchronized transient native', types: 'int long short byte char float double boolean String Object List Map' },
  ruby: { line: '#', kw: 'def end if elsif else unless while until for in do return class module self nil true false yield begin rescue ensure require' },
  toml: { line: '#', kw: 'true false', keys: true },
};
const ALIASES = { golang: 'go', javascript: 'js', jsx: 'js', mjs: 'js', cjs: 'js', node: 'js', typescript: 'ts', tsx: 'ts', python: 'py', python3: 'py', rs: 'rust', bash: 'sh', shell: 'sh', zsh: 'sh', console: 'sh', shellscript: 'sh', yml: 'yaml', jsonc: 'json', json5: 'json', cpp: 'c', 'c++': 'c', cc: 'c', h: 'c', hpp: 'c', cs: 'java', csharp: 'java', kotlin: 'java', kt: 'java', swift: 'java', scala: 'java', rb: 'ruby', scss: 'css', less: 'css', postgres: 'sql', sqlite: 'sql', mysql: 'sql', dockerfile: 'sh', makefile: 'sh', make: 'sh' };
const GENERIC = { line: '//', hash: true, block: true, kw: C_LIKE };

const compiled = new Map();

function spec(lang) {
  const key = ALIASES[lang] || lang;
  if (compiled.has(key)) return compiled.get(key);
  const s = LANGS[key] || GENERIC;
  const parts = [];
  if (s.block) parts.push('\\/\\*[\\s\\S]*?(?:\\*\\/|$)');
  if (s.line) parts.push(s.line.replace(/[/#-]/g, (c) => '\\' + c) + '.*');
  if (s.hash) parts.push('#(?![\\w{[]).*'); // the fallback: "# comment" but not "#include" or "#[attr]"
  const strs = ['"(?:[^"\\\\\\n]|\\\\.)*"?', "'(?:[^'\\\\\\n]|\\\\.)*'?"];
  if (s.raw) strs.push('`[^`]*`?');
  if (key === 'py') strs.unshift('"""[\\s\\S]*?(?:"""|$)', "'''[\\s\\S]*?(?:'''|$)");
  const re = new RegExp(
    '(' + (parts.join('|') || '(?!)') + ')|(' + strs.join('|') + ')|(\\b0[xX][0-9a-fA-F_]+\\b|\\b\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?\\b)|([#@]?[A-Za-z_$][\\w$]*)',
    'gm');
  const c = { re, kw: words(s.kw || ''), types: words(s.types || ''), ci: !!s.ci, keys: !!s.keys };
  compiled.set(key, c);
  return c;
}

const MAX_HIGHLIGHT = 60000; // characters; beyond that, plain text

/** highlight returns a fragment of code with spans for its tokens. */
export function highlight(code, lang) {
  const frag = document.createDocumentFragment();
  const l = String(lang || '').toLowerCase();
  if (code.length > MAX_HIGHLIGHT) { frag.append(code); return frag; }
  if (l === 'diff' || l === 'patch' || (!l && /^(@@ |diff --git|--- a\/)/m.test(code) && /^[+-]/m.test(code))) {
    for (const line of code.split('\n')) {
      const cls = /^(\+\+\+|---)/.test(line) ? 'tk-meta' : line[0] === '+' ? 'tk-add' : line[0] === '-' ? 'tk-del' : line.startsWith('@@') ? 'tk-meta' : '';
      frag.append(cls ? h('span', { class: cls, text: line }) : line, '\n');
    }
    frag.lastChild?.remove();
    return frag;
  }
  const s = spec(l);
  let last = 0;
  s.re.lastIndex = 0;
  let m;
  while ((m = s.re.exec(code))) {
    if (m[0] === '') { s.re.lastIndex++; continue; }
    if (m.index > last) frag.append(code.slice(last, m.index));
    let cls = '';
    if (m[1]) cls = 'tk-com';
    else if (m[2]) cls = s.keys && /^\s*:/.test(code.slice(s.re.lastIndex, s.re.lastIndex + 8)) ? 'tk-key' : 'tk-str';
    else if (m[3]) cls = 'tk-num';
    else if (m[4]) {
      const w = s.ci ? m[4].toLowerCase() : m[4];
      if (s.kw.has(w)) cls = 'tk-kw';
      else if (s.types.has(w)) cls = 'tk-type';
      else if (code[s.re.lastIndex] === '(') cls = 'tk-fn';
    }
    frag.append(cls ? h('span', { class: cls, text: m[0] }) : m[0]);
    last = s.re.lastIndex;
  }
  if (last < code.length) frag.append(code.slice(last));
  return frag;
}
