package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	h := Handler()
	get := func(path, etag string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	tests := []struct {
		path, ctype string
		code        int
	}{
		{"/", "text/html", 200},
		{"/index.html", "text/html", 200},
		{"/js/app.js", "text/javascript", 200},
		{"/app.css", "text/css", 200},
		{"/manifest.webmanifest", "application/manifest+json", 200},
		{"/nope.js", "", 404},
		{"/../web.go", "", 404},
	}
	for _, tt := range tests {
		w := get(tt.path, "")
		if w.Code != tt.code || !strings.HasPrefix(w.Header().Get("Content-Type"), tt.ctype) {
			t.Errorf("%s: %d %q", tt.path, w.Code, w.Header().Get("Content-Type"))
		}
		if tt.code == 200 && (w.Header().Get("Content-Security-Policy") != ContentSecurityPolicy || w.Header().Get("X-Content-Type-Options") != "nosniff") {
			t.Errorf("%s: security headers %v", tt.path, w.Header())
		}
	}
	// Revalidation by ETag.
	etag := get("/js/app.js", "").Header().Get("ETag")
	if w := get("/js/app.js", etag); etag == "" || w.Code != http.StatusNotModified {
		t.Errorf("etag %q: %d", etag, w.Code)
	}
}

// The app runs from the embedded files alone: every module an HTML or JS
// file imports is embedded, and nothing is loaded from another origin.
func TestNoExternalResources(t *testing.T) {
	files := Files()
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(files, p)
		s := string(b)
		// No resource from elsewhere, and no HTML parsed from strings.
		for _, bad := range []string{`src="http`, `href="http`, "url(http", "from 'http", "import('http", "//cdn",
			"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q", p, bad)
			}
		}
		if strings.HasSuffix(p, ".js") {
			for _, line := range strings.Split(s, "\n") {
				if i := strings.Index(line, "from './"); strings.HasPrefix(strings.TrimSpace(line), "import ") && i >= 0 {
					mod := "js/" + strings.TrimSuffix(strings.SplitN(line[i+len("from './"):], "'", 2)[0], "")
					if _, err := fs.Stat(files, mod); err != nil {
						t.Errorf("%s imports %s, not embedded", p, mod)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Files are served gzipped to clients that accept gzip (compressed once,
// when the handler is made), plain to others, each with its own ETag and
// Vary: Accept-Encoding; files under MinGzipBytes are never compressed.
func TestHandlerGzip(t *testing.T) {
	h := Handler()
	get := func(path, accept, etag string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	var plainTotal, gzTotal int
	err := fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want, _ := fs.ReadFile(Files(), p)
		plain := get("/"+p, "", "")
		if plain.Header().Get("Content-Encoding") != "" || !bytes.Equal(plain.Body.Bytes(), want) {
			t.Errorf("%s without gzip: encoding %q", p, plain.Header().Get("Content-Encoding"))
		}
		for _, accept := range []string{"gzip", "gzip, deflate, br, zstd", "br;q=1.0, gzip;q=0.8", "*"} {
			w := get("/"+p, accept, "")
			if len(want) < MinGzipBytes {
				if w.Header().Get("Content-Encoding") != "" {
					t.Errorf("%s (%d bytes) compressed", p, len(want))
				}
				continue
			}
			if w.Header().Get("Content-Encoding") != "gzip" || w.Header().Get("Vary") != "Accept-Encoding" {
				t.Errorf("%s with %q: encoding %q, vary %q", p, accept, w.Header().Get("Content-Encoding"), w.Header().Get("Vary"))
				continue
			}
			size := w.Body.Len()
			zr, err := gzip.NewReader(w.Body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: the gzip body is not the file (%v)", p, err)
			}
			if w.Header().Get("ETag") == plain.Header().Get("ETag") {
				t.Errorf("%s: the same ETag for the gzip and plain bodies", p)
			}
			if nm := get("/"+p, accept, w.Header().Get("ETag")); nm.Code != http.StatusNotModified {
				t.Errorf("%s: revalidating the gzip body: %d", p, nm.Code)
			}
			if accept == "gzip" {
				plainTotal += len(want)
				gzTotal += size
			}
		}
		if len(want) >= MinGzipBytes {
			if w := get("/"+p, "gzip;q=0, identity", ""); w.Header().Get("Content-Encoding") != "" {
				t.Errorf("%s: gzip;q=0 got gzip", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compressible files: %d bytes plain, %d gzipped", plainTotal, gzTotal)
	if gzTotal == 0 || gzTotal > plainTotal/2 {
		t.Errorf("gzip: %d of %d bytes", gzTotal, plainTotal)
	}
}
