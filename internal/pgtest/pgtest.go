// Package pgtest starts a throwaway PostgreSQL server for a test: initdb in
// a temporary folder, listening on a unix socket only (no TCP), stopped and
// removed when the test ends. It uses Debian's postgresql package
// (/usr/lib/postgresql/<version>/bin), or the folder in CCRELAY_TEST_PGBIN.
// Without it the test is skipped, except under CI=true, where it fails.
package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// BinEnv names the folder of initdb and pg_ctl, when not Debian's.
const BinEnv = "CCRELAY_TEST_PGBIN"

// Server is a running PostgreSQL.
type Server struct {
	dir, socket, bin string
	asUser           string // the user the server runs as ("" for this one)
	n                int    // databases made
	mu               sync.Mutex
}

// bin finds initdb and pg_ctl.
func bin(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(BinEnv); d != "" {
		return d
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Strings(found)
	if len(found) > 0 {
		return filepath.Dir(found[len(found)-1])
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no PostgreSQL: CI must install it (.ci/run installs Debian's postgresql; or set %s)", BinEnv)
	}
	t.Skipf("no PostgreSQL (install Debian's postgresql, or set %s to the folder of initdb)", BinEnv)
	return ""
}

// Start starts a server for t, stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{bin: bin(t)}
	// PostgreSQL refuses to run as root: as root it runs as postgres,
	// which needs to reach its folder.
	base := t.TempDir()
	if os.Geteuid() == 0 {
		s.asUser = "postgres"
		u, err := user.Lookup(s.asUser)
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs the user postgres: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// Each folder above it must let postgres through (not read).
		for d := base; d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				os.Chmod(d, fi.Mode().Perm()|0o001)
			}
		}
		if err := os.Chown(base, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	s.dir = filepath.Join(base, "data")
	s.socket = base
	s.run(t, "initdb", "-D", s.dir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C")
	conf := "listen_addresses = ''\nunix_socket_directories = '" + base + "'\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\n"
	if err := os.WriteFile(filepath.Join(s.dir, "postgresql.auto.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if s.asUser != "" {
		s.chownConf(t)
	}
	s.run(t, "pg_ctl", "-D", s.dir, "-w", "-t", "60", "-l", filepath.Join(base, "log"), "start")
	t.Cleanup(func() { s.Stop(t) })
	return s
}

func (s *Server) chownConf(t testing.TB) {
	u, _ := user.Lookup(s.asUser)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	os.Chown(filepath.Join(s.dir, "postgresql.auto.conf"), uid, gid)
}

// command is a PostgreSQL program, to run as the server's user.
func (s *Server) command(prog string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, prog)
	var cmd *exec.Cmd
	if s.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

// run runs a PostgreSQL program, as the server's user.
func (s *Server) run(t testing.TB, prog string, args ...string) {
	t.Helper()
	if out, err := s.command(prog, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.socket, "log"))
		t.Fatalf("%s %s: %v\n%s\n%s", prog, strings.Join(args, " "), err, out, log)
	}
}

// Stop stops the server (immediate: its data is thrown away).
func (s *Server) Stop(t testing.TB) {
	s.command("pg_ctl", "-D", s.dir, "-m", "immediate", "-w", "stop").Run()
}

// URL is a connection URL for database name (on the unix socket).
func (s *Server) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&sslmode=disable", name, s.socket)
}

// NewDatabase makes an empty database and returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("t%d", s.n)
	s.mu.Unlock()
	if out, err := s.command("createdb", "-h", s.socket, "-U", "postgres", name).CombinedOutput(); err != nil {
		t.Fatalf("createdb %s: %v\n%s", name, err, out)
	}
	return s.URL(name)
}
