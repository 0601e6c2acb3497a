// Package web is the ccrelay app: static files (plain ES modules, no build
// step) embedded in the binary and served by the relay at "/".
//
// The app holds no secret: the relay's token reaches it in the URL fragment,
// which browsers never send, and it authenticates its websocket with it.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:generate go run icons_gen.go

//go:embed static
var embedded embed.FS

// Files are the app's files, rooted at the app's "/".
func Files() fs.FS {
	sub, err := fs.Sub(embedded, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the folder
	}
	return sub
}

// ContentSecurityPolicy keeps untrusted session text inert even if a bug let
// markup through: only the app's own scripts and styles run, no inline
// script, no plugins, no framing, and connections only to this origin. The
// service worker (sw.js) must come from this origin too.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// ServiceWorker is the path of the app's service worker (scope "/").
const ServiceWorker = "/sw.js"

// MinGzipBytes is the smallest file served gzip-compressed: below it the
// header costs about what compression saves.
const MinGzipBytes = 1024

type file struct {
	body  []byte
	gz    []byte // gzip of body, made once; nil when not worth it
	etag  string
	ctype string
}

// gzipped compresses b at the best level; nil when it would not be smaller.
func gzipped(b []byte) []byte {
	if len(b) < MinGzipBytes {
		return nil
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil || zw.Close() != nil || buf.Len() >= len(b) {
		return nil
	}
	return buf.Bytes()
}

// acceptsGzip says whether a request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") || strings.TrimSpace(name) == "*" {
				q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
				return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
			}
		}
	}
	return false
}

// Handler serves the app. Files are revalidated on every load (by a strong
// ETag of their content), so a new binary's app is picked up at once. Files
// of MinGzipBytes or more are compressed once, here, and served gzipped to
// clients that accept it.
func Handler() http.Handler {
	files := map[string]file{}
	root := Files()
	_ = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) {
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".webmanifest":
			ct = "application/manifest+json"
		}
		files["/"+p] = file{body: b, gz: gzipped(b), etag: hex.EncodeToString(sum[:12]), ctype: ct}
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/" {
			p = "/index.html"
		}
		f, ok := files[p]
		if !ok { // only the embedded files: no path reaches outside them
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if p == ServiceWorker {
			// Its scope is the whole app; browsers revalidate it on every
			// update check (no-cache) and never take it from elsewhere.
			h.Set("Service-Worker-Allowed", "/")
		}
		if f.ctype != "" {
			h.Set("Content-Type", f.ctype)
		}
		body, etag := f.body, `"`+f.etag+`"`
		if f.gz != nil {
			h.Add("Vary", "Accept-Encoding")
			if acceptsGzip(r) {
				// The compressed copy is another representation: its own ETag.
				body, etag = f.gz, `"`+f.etag+`-gz"`
				h.Set("Content-Encoding", "gzip")
			}
		}
		h.Set("ETag", etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	})
}
