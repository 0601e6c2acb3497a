// Command release builds ccrelay's release archives reproducibly: the same
// commit gives the same bytes, whoever builds it and wherever.
//
//	go run ./internal/release -version v1.2.3 -out dist
//
// For each target (Targets) it builds cmd/ccrelay with CGO_ENABLED=0,
// -trimpath (no build folder in the binary), -buildvcs=false (no
// checkout state) and the version, commit and commit time stamped with
// -ldflags; it packs the binary with README.md and LICENSE into a tar.gz
// (Unix) or a zip (Windows) whose entries carry the commit's time, fixed
// owners and modes, in a fixed order; and it writes SHA256SUMS.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Targets are the platforms a release is built for.
var Targets = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

// Module is the module path; its cmd/ccrelay is built.
const Module = "github.com/ccrelay/ccrelay"

// Options say what to build.
type Options struct {
	Root    string    // the module's folder
	Out     string    // where archives and SHA256SUMS go (made if missing)
	Version string    // e.g. v1.2.3
	Commit  string    // the commit's hash
	Date    time.Time // the commit's time: the build date and every entry's mtime
	Targets []string  // nil: Targets
}

// Artifact is one archive written.
type Artifact struct {
	Target string
	Name   string // file name in Out
	SHA256 string // hex
	Binary int64  // the binary's size in bytes
}

// Build builds every target's archive and SHA256SUMS in o.Out.
func Build(ctx context.Context, o Options) ([]Artifact, error) {
	targets := o.Targets
	if targets == nil {
		targets = Targets
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	var arts []Artifact
	for _, t := range targets {
		a, err := buildTarget(ctx, o, t)
		if err != nil {
			return nil, err
		}
		arts = append(arts, a)
	}
	var sums strings.Builder
	sorted := slices.Clone(arts)
	slices.SortFunc(sorted, func(a, b Artifact) int { return strings.Compare(a.Name, b.Name) })
	for _, a := range sorted {
		fmt.Fprintf(&sums, "%s  %s\n", a.SHA256, a.Name)
	}
	if err := os.WriteFile(filepath.Join(o.Out, "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return arts, nil
}

// BuildBinary builds cmd/ccrelay for target into path, as a release does.
func BuildBinary(ctx context.Context, o Options, target, path string) error {
	goos, goarch, ok := strings.Cut(target, "/")
	if !ok {
		return fmt.Errorf("release: target %q is not os/arch", target)
	}
	ld := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s -X main.buildDate=%s",
		o.Version, o.Commit, o.Date.UTC().Format(time.RFC3339))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags="+ld, "-o", path, "./cmd/ccrelay")
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("release: build %s: %w\n%s", target, err, out)
	}
	return nil
}

func buildTarget(ctx context.Context, o Options, target string) (Artifact, error) {
	goos, goarch, _ := strings.Cut(target, "/")
	base := fmt.Sprintf("ccrelay_%s_%s_%s", strings.TrimPrefix(o.Version, "v"), goos, goarch)
	exe := "ccrelay"
	if goos == "windows" {
		exe += ".exe"
	}
	tmp, err := os.MkdirTemp("", "ccrelay-release-")
	if err != nil {
		return Artifact{}, fmt.Errorf("release: %w", err)
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, exe)
	if err := BuildBinary(ctx, o, target, bin); err != nil {
		return Artifact{}, err
	}
	files := []entry{{name: exe, path: bin, mode: 0o755}}
	for _, f := range []string{"README.md", "LICENSE", "docs/install.md"} {
		if _, err := os.Stat(filepath.Join(o.Root, f)); err == nil {
			files = append(files, entry{name: f, path: filepath.Join(o.Root, f), mode: 0o644})
		}
	}
	var buf bytes.Buffer
	name := base + ".tar.gz"
	if goos == "windows" {
		name = base + ".zip"
		err = writeZip(&buf, base, files, o.Date)
	} else {
		err = writeTarGz(&buf, base, files, o.Date)
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("release: pack %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(o.Out, name), buf.Bytes(), 0o644); err != nil {
		return Artifact{}, fmt.Errorf("release: %w", err)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return Artifact{}, fmt.Errorf("release: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return Artifact{Target: target, Name: name, SHA256: hex.EncodeToString(sum[:]), Binary: fi.Size()}, nil
}

// entry is a file packed into an archive, under dir/name.
type entry struct {
	name string // slash-separated, inside the archive's folder
	path string
	mode int64
}

func writeTarGz(w io.Writer, dir string, files []entry, mtime time.Time) error {
	gz, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	gz.ModTime = mtime.UTC() // the header's time is the commit's, and no name
	tw := tar.NewWriter(gz)
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: dir + "/" + f.name, Mode: f.mode, Size: int64(len(b)), ModTime: mtime.UTC(),
			Typeflag: tar.TypeReg, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeZip(w io.Writer, dir string, files []entry, mtime time.Time) error {
	zw := zip.NewWriter(w)
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		hdr := &zip.FileHeader{Name: dir + "/" + f.name, Method: zip.Deflate, Modified: mtime.UTC()}
		hdr.SetMode(os.FileMode(f.mode))
		fw, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := fw.Write(b); err != nil {
			return err
		}
	}
	return zw.Close()
}

// FromGit fills Commit and Date from the checkout at root's HEAD.
func FromGit(ctx context.Context, o *Options) error {
	out, err := exec.CommandContext(ctx, "git", "-C", o.Root, "log", "-1", "--format=%H %ct").Output()
	if err != nil {
		return fmt.Errorf("release: read the commit: %w", err)
	}
	var secs int64
	if _, err := fmt.Sscan(string(out), &o.Commit, &secs); err != nil {
		return fmt.Errorf("release: read the commit %q: %w", out, err)
	}
	o.Date = time.Unix(secs, 0).UTC()
	return nil
}
