package web

import (
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
