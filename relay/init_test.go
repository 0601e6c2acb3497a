package relay

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The relay's package initialization is cheap: every ccrelay command runs
// it (ccrelay replay of a small session too), so nothing is compiled or
// built there that only a serving relay needs. It cost 839 allocations and
// a third of a millisecond, most of it compiling a device id's regular
// expression (64 repetitions).
func TestPackageInitCheap(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// init github.com/ccrelay/ccrelay/relay @12 ms, 0.35 ms clock, 68872 bytes, 839 allocs
	m := regexp.MustCompile(`(?m)^init github\.com/ccrelay/ccrelay/relay @.*, ([0-9]+) bytes, ([0-9]+) allocs$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no init trace of the relay package:\n%s", out)
	}
	allocs, _ := strconv.Atoi(string(m[2]))
	t.Logf("relay's init: %s bytes, %d allocations", m[1], allocs)
	if allocs > 200 {
		t.Fatalf("relay's init made %d allocations, want at most 200", allocs)
	}
}

// validDeviceID accepts what the pattern it replaces accepted.
func TestValidDeviceID(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)
	for _, id := range []string{
		"", "abc", strings.Repeat("a", 15), strings.Repeat("a", 16), strings.Repeat("Z9_-", 16), strings.Repeat("a", 65),
		strings.Repeat("a", 16) + "\n", "\n" + strings.Repeat("a", 16), strings.Repeat("a", 15) + "é", strings.Repeat("a", 20) + " ",
		strings.Repeat("a", 20) + ".", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnop/q", strings.Repeat("\x00", 16),
	} {
		if got, want := validDeviceID(id), re.MatchString(id); got != want {
			t.Errorf("validDeviceID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}
