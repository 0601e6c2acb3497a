// Package web is the ccrelay app: static files (plain ES modules, no build
// step) embedded in the binary and served by the relay at "/".
//
// The app holds no secret: the relay's token reaches it in the URL fragment,
// which browsers never send, and it authenticates its websocket with it.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"
)

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
// script, no plugins, no framing, and connections only to this origin.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type file struct {
	body  []byte
	etag  string
	ctype string
}

// Handler serves the app. Files are revalidated on every load (by a strong
// ETag of their content), so a new binary's app is picked up at once.
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
		files["/"+p] = file{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, ctype: ct}
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
		h.Set("ETag", f.etag)
		if f.ctype != "" {
			h.Set("Content-Type", f.ctype)
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}
