package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/web/internal/iconart"
)

// The service worker is served from the root (its scope is the app), as
// JavaScript, revalidated on every update check, and the CSP lets it run.
func TestServiceWorkerServed(t *testing.T) {
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, ServiceWorker, nil))
	h := w.Header()
	if w.Code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/javascript") {
		t.Fatalf("%s: %d %q", ServiceWorker, w.Code, h.Get("Content-Type"))
	}
	if h.Get("Service-Worker-Allowed") != "/" || h.Get("Cache-Control") != "no-cache" {
		t.Errorf("headers %v", h)
	}
	if !strings.Contains(ContentSecurityPolicy, "worker-src 'self'") {
		t.Error("the CSP does not allow the app's own worker")
	}
}

// The service worker's shell is every file of the app (but itself): a
// file added to the app and not to SHELL would be missing offline.
func TestServiceWorkerShellComplete(t *testing.T) {
	b, err := fs.ReadFile(Files(), "sw.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)const SHELL = \[(.*?)\];`).FindSubmatch(b)
	if m == nil {
		t.Fatal("sw.js has no SHELL list")
	}
	var shell []string
	for _, q := range regexp.MustCompile(`'([^']*)'`).FindAllSubmatch(m[1], -1) {
		shell = append(shell, string(q[1]))
	}
	var files []string
	fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != "sw.js" {
			files = append(files, p)
		}
		return err
	})
	files = append(files, "./")
	slices.Sort(files)
	slices.Sort(shell)
	if !slices.Equal(shell, files) {
		t.Errorf("sw.js SHELL:\n %v\nthe app's files:\n %v", shell, files)
	}
}

// The manifest names PNG icons of the sizes home screens want, a maskable
// one, and every icon it names exists with its stated size; index.html
// names an Apple touch icon.
func TestManifestIcons(t *testing.T) {
	b, err := fs.ReadFile(Files(), "manifest.webmanifest")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Icons []struct{ Src, Sizes, Type, Purpose string }
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, ic := range m.Icons {
		if ic.Type != "image/png" {
			continue
		}
		f, err := fs.ReadFile(Files(), ic.Src)
		if err != nil {
			t.Errorf("%s: %v", ic.Src, err)
			continue
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(f))
		if err != nil {
			t.Errorf("%s: %v", ic.Src, err)
			continue
		}
		if got := fmt.Sprint(cfg.Width) + "x" + fmt.Sprint(cfg.Height); got != ic.Sizes {
			t.Errorf("%s is %s, the manifest says %s", ic.Src, got, ic.Sizes)
		}
		have[ic.Sizes+"/"+ic.Purpose] = true
	}
	for _, want := range []string{"192x192/any", "512x512/any", "512x512/maskable"} {
		if !have[want] {
			t.Errorf("no %s PNG icon in the manifest", want)
		}
	}
	idx, _ := fs.ReadFile(Files(), "index.html")
	if !bytes.Contains(idx, []byte(`rel="apple-touch-icon" href="apple-touch-icon.png"`)) {
		t.Error("index.html names no apple-touch-icon")
	}
	f, _ := fs.ReadFile(Files(), "apple-touch-icon.png")
	img, err := png.Decode(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds() != image.Rect(0, 0, 180, 180) {
		t.Errorf("apple-touch-icon is %v, want 180x180", img.Bounds())
	}
	if _, _, _, a := img.At(0, 0).RGBA(); a != 0xffff {
		t.Error("apple-touch-icon has transparent corners (iOS shows them black)")
	}
}

// The checked-in icons are what iconart draws (run `go generate ./web`
// after changing it).
func TestIconsGenerated(t *testing.T) {
	for _, ic := range iconart.Icons {
		got, err := os.ReadFile(path.Join("static", ic.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, iconart.PNG(ic)) {
			t.Errorf("static/%s is not what iconart draws: go generate ./web", ic.Name)
		}
	}
}
