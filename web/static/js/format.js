// Formatting of times, sizes and paths for people.

/** ago says how long ago a Unix-ms time was: "now", "5m", "3h", "2d", or a date. */
export function ago(ms, now = Date.now()) {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 45) return 'now';
  if (s < 3600) return Math.round(s / 60) + 'm ago';
  if (s < 86400) return Math.round(s / 3600) + 'h ago';
  if (s < 7 * 86400) return Math.round(s / 86400) + 'd ago';
  return new Date(ms).toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
}

/** duration formats milliseconds as "850ms", "2.5s", "12s", "3m 20s", "1h 5m". */
export function duration(ms) {
  if (!(ms >= 0)) return '';
  if (ms < 1000) return Math.round(ms) + 'ms';
  if (ms < 9950) return (ms / 1000).toFixed(1).replace(/\.0$/, '') + 's';
  const s = Math.round(ms / 1000);
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
  return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
}

/** tokens formats a token count: 950, 12.3k, 1.2M. */
export function tokens(n) {
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1000).toFixed(n < 1e4 ? 1 : 0) + 'k';
  return (n / 1e6).toFixed(1) + 'M';
}

/** baseName is the last element of a path. */
export function baseName(p) {
  if (!p) return '';
  const parts = String(p).replace(/[\\/]+$/, '').split(/[\\/]/);
  return parts[parts.length - 1] || p;
}

/** shortPath puts "~" for a home folder. */
export function shortPath(p) {
  if (!p) return '';
  return String(p).replace(/^\/(home|Users)\/[^/]+/, '~').replace(/^\/root(?=\/|$)/, '~');
}

/** oneLine folds whitespace and cuts to max characters. */
export function oneLine(s, max = 120) {
  const t = String(s ?? '').replace(/\s+/g, ' ').trim();
  return t.length > max ? t.slice(0, max - 1) + '…' : t;
}
