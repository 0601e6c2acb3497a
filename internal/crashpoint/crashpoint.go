// Package crashpoint is a test seam that stops a process at a named step
// of a durable change, as a crash or power cut would there. A process
// started with CCRELAY_CRASH_AT=<step> kills itself with SIGKILL the first
// time it reaches Hit(<step>); CCRELAY_CRASH_AT=<step>@<n> the nth time.
// Without the variable Hit costs one comparison. The steps are listed in
// Steps; tests walk every one of them.
package crashpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Env is the variable that names the step to stop at.
const Env = "CCRELAY_CRASH_AT"

// The steps, in the order an envelope meets them.
const (
	// ScannerDelivered: the scanner delivered a batch (its envelopes are
	// in the outbox) and has not saved its cursor.
	ScannerDelivered = "scanner-delivered"
	// OutboxWritten: an append is written to the outbox's log, not fsynced.
	OutboxWritten = "outbox-written"
	// OutboxSynced: an append is fsynced, the caller not told yet.
	OutboxSynced = "outbox-synced"
	// RelayCommitted: the relay committed a batch and has not acked it.
	RelayCommitted = "relay-committed"
	// OutboxAcked: the relay's ack arrived; the acknowledged offset is not
	// saved yet.
	OutboxAcked = "outbox-acked"
	// OutboxCompacted: compaction replaced the log; the new offset is not
	// saved yet.
	OutboxCompacted = "outbox-compacted"
	// Renamed: a durable replace renamed its new file into place and has
	// not fsynced the folder (durable.Replace: the acknowledged offset,
	// the cursor, a new outbox log).
	Renamed = "renamed"
	// SwitchFlushed: a switch to the app delivered what the scanner read;
	// the turn is not closed yet.
	SwitchFlushed = "switch-flushed"
	// SwitchClosed: a switch closed the terminal's turn; remote mode has
	// not started.
	SwitchClosed = "switch-closed"
	// AdoptCopied: a starting ccrelay appended (and fsynced) a batch of
	// the unsent envelopes an ended run's slot left to its own outbox; the
	// slot is still there, with what it has not copied yet.
	AdoptCopied = "adopt-copied"
	// SlotRenamed: a slot taken over was renamed aside for removal and is
	// not removed yet.
	SlotRenamed = "slot-renamed"
	// LedgerBegun: the command ledger recorded (fsynced) that a command
	// is being carried out; it is not carried out yet.
	LedgerBegun = "ledger-begun"
	// LedgerFinished: the command ledger recorded (fsynced) a command's
	// outcome; the relay is not told yet.
	LedgerFinished = "ledger-finished"
	// RelayCommandAdded: the relay stored an app's new command; it is
	// neither handed to the CLI nor told to the apps yet.
	RelayCommandAdded = "relay-command-added"
	// RelayCommandMoved: the relay stored a command's next status
	// (delivered, done, rejected); the apps are not told yet.
	RelayCommandMoved = "relay-command-moved"
	// RemoteMapped: remote mode appended (and fsynced) envelopes it mapped
	// from Claude's stream-json to the outbox; the scanner's copy of those
	// records is not passed yet.
	RemoteMapped = "remote-mapped"
	// RemoteHeld: the scanner read a conversation record of a session
	// remote mode drives whose stream-json copy is not in the outbox yet,
	// and holds its batch (the scanner's cursor stays before it).
	RemoteHeld = "remote-held"
	// BackToLocal: remote mode gave the session back to the terminal (its
	// Claude stopped, its turn ended); local mode has not started.
	BackToLocal = "back-to-local"
	// CodexPromptTaken: Codex's app-server took a prompt from the app
	// (turn/start or turn/steer answered); its outcome is not recorded in
	// the command ledger yet.
	CodexPromptTaken = "codex-prompt-taken"
)

// Steps lists every step.
var Steps = []string{ScannerDelivered, OutboxWritten, OutboxSynced, RelayCommitted, OutboxAcked, OutboxCompacted,
	Renamed, SwitchFlushed, SwitchClosed, AdoptCopied, SlotRenamed, LedgerBegun, LedgerFinished, RelayCommandAdded,
	RelayCommandMoved, RemoteMapped, RemoteHeld, BackToLocal, CodexPromptTaken}

var (
	once   sync.Once
	target string
	nth    int64 = 1
	hits   atomic.Int64
)

func load() {
	v := os.Getenv(Env)
	if name, n, ok := strings.Cut(v, "@"); ok {
		if k, err := strconv.ParseInt(n, 10, 64); err == nil && k > 0 {
			v, nth = name, k
		}
	}
	target = v
}

// Hit marks that the process reached step. If it is the step named by
// CCRELAY_CRASH_AT (the nth time), the process kills itself at once.
func Hit(step string) {
	once.Do(load)
	if target == "" || step != target {
		return
	}
	if hits.Add(1) == nth {
		kill()
	}
}
