package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testOptions(t testing.TB, out string) Options {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return Options{Root: root, Out: out, Version: "v0.0.0-test", Commit: "0123456789abcdef0123456789abcdef01234567",
		Date: time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)}
}

// The same commit gives the same bytes: one target built twice, into
// different folders, has the same archive checksum, and SHA256SUMS is the
// same. (The second build reuses the Go build cache's compiled packages:
// what it checks is the link, the stamping and the archive.)
func TestReproducible(t *testing.T) {
	for _, target := range []string{"linux/amd64"} {
		t.Run(target, func(t *testing.T) {
			var sums [2]string
			var names [2]string
			for i := range sums {
				o := testOptions(t, t.TempDir())
				o.Targets = []string{target}
				arts, err := Build(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(o.Out, "SHA256SUMS"))
				if err != nil {
					t.Fatal(err)
				}
				sums[i], names[i] = string(b), arts[0].Name
				if i == 0 {
					// Another mtime on the sources must not matter.
					now := time.Now()
					os.Chtimes(filepath.Join(o.Root, "README.md"), now, now)
				}
			}
			if sums[0] != sums[1] {
				t.Fatalf("two builds of %s differ:\n%s\n%s", target, sums[0], sums[1])
			}
			t.Logf("%s", sums[0])
		})
	}
}

// The archives' bytes depend on their contents and the commit's time only:
// packed twice, with the files' own times changed in between, a tar.gz and
// a zip come out the same.
func TestArchivesDeterministic(t *testing.T) {
	dir := t.TempDir()
	bin, doc := filepath.Join(dir, "ccrelay"), filepath.Join(dir, "README.md")
	os.WriteFile(bin, []byte("binary"), 0o755)
	os.WriteFile(doc, []byte("readme"), 0o644)
	files := []entry{{name: "ccrelay", path: bin, mode: 0o755}, {name: "README.md", path: doc, mode: 0o644}}
	when := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	for _, pack := range []struct {
		name string
		fn   func(io.Writer, string, []entry, time.Time) error
	}{{"tar.gz", writeTarGz}, {"zip", writeZip}} {
		var out [2]bytes.Buffer
		for i := range out {
			if err := pack.fn(&out[i], "ccrelay_1_x", files, when); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(time.Hour)
			os.Chtimes(bin, later, later)
		}
		if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
			t.Errorf("%s: two packings differ", pack.name)
		}
	}
}

// BenchmarkBinarySize reports the size of the release binary of each
// target (bytes/binary); the time is the build's.
func BenchmarkBinarySize(b *testing.B) {
	for _, target := range Targets {
		b.Run(strings.ReplaceAll(target, "/", "_"), func(b *testing.B) {
			o := testOptions(b, b.TempDir())
			var size int64
			for range b.N {
				path := filepath.Join(o.Out, "ccrelay")
				if err := BuildBinary(context.Background(), o, target, path); err != nil {
					b.Fatal(err)
				}
				fi, err := os.Stat(path)
				if err != nil {
					b.Fatal(err)
				}
				size = fi.Size()
			}
			b.ReportMetric(float64(size), "bytes/binary")
		})
	}
}
