// Paths as a permission request names them: whether a file lies in the
// session's project folder. The check is by name only (a page cannot
// resolve symbolic links): a path is said to be outside only when its
// name is, and a path it cannot judge is never said to be outside.

// On macOS /tmp, /var and /etc are links to /private/…: Claude Code may name
// either spelling for the same file.
const PRIVATE = /^\/private(?=\/(?:tmp|var|etc)(?:\/|$))/;

/**
 * splitPath is path's parts after resolving it against base (a relative
 * path is in base), with "." and ".." taken out; null when it cannot be
 * read (empty, or relative with no absolute base, or "~").
 * windows: compare as Windows does (either separator, any case).
 */
function splitPath(path, base, windows) {
  let p = String(path || '').trim();
  if (!p) return null;
  if (windows) p = p.replace(/\\/g, '/').replace(/^\/\/\?\//, '');
  if (p === '~' || p.startsWith('~/')) return null;
  const abs = windows ? /^[A-Za-z]:\//.test(p) || p.startsWith('//') : p.startsWith('/');
  if (!abs) {
    if (!base) return null;
    const b = splitPath(base, '', windows);
    if (!b) return null;
    return b.root === null ? null : resolve(b.root, [...b.parts, ...p.split('/')], windows);
  }
  let root = '/';
  let rest = p;
  if (windows) {
    const m = /^([A-Za-z]:|\/\/[^/]+\/[^/]+)(\/.*|$)/.exec(p);
    if (!m) return null;
    root = m[1].toLowerCase();
    rest = m[2];
  } else {
    rest = p.replace(PRIVATE, '');
  }
  return resolve(root, rest.split('/'), windows);
}

function resolve(root, segs, windows) {
  const parts = [];
  for (const s of segs) {
    if (s === '' || s === '.') continue;
    if (s === '..') { parts.pop(); continue; } // ".." at the root stays there
    parts.push(windows ? s.toLowerCase() : s);
  }
  return { root, parts };
}

/** isWindowsPath tells whether a path is spelt as on Windows (C:\…, C:/…, \\server\share). */
export function isWindowsPath(p) {
  return /^(?:[A-Za-z]:[\\/]|\\\\)/.test(String(p || '').trim());
}

/**
 * outsideProject tells whether path lies outside the folder cwd (the
 * session's project): false when it is in it (or is it), and false when it
 * cannot tell (no cwd, a path relative to a home folder it does not know).
 * A relative path is relative to cwd; "." and ".." are resolved; trailing
 * separators do not count; Windows paths compare with either separator and
 * in any case; macOS's /private/tmp (/var, /etc) is /tmp.
 */
export function outsideProject(path, cwd) {
  const windows = isWindowsPath(cwd) || isWindowsPath(path);
  const dir = splitPath(cwd, '', windows);
  const p = splitPath(path, cwd, windows);
  if (!dir || !p) return false;
  if (p.root !== dir.root) return true;
  if (p.parts.length < dir.parts.length) return true;
  return dir.parts.some((s, i) => p.parts[i] !== s);
}
