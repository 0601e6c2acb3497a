package launcher

// Which process writes a rollout. Codex keeps a thread's rollout open for
// as long as it runs the thread (seen with 0.169.0: the codex binary under
// the node launcher holds it), and says nothing else of its threads to
// another process; a second Codex in the same folder writes rollouts of
// the same kind there. Where the system tells which process holds a file
// open (Linux: /proc), a rollout is this run's only when a process of its
// tree holds it, Codex's shared app server aside (it holds every TUI's
// rollouts); where that does not say, only the first thread found that
// began after this run started is.

// rolloutHolder is what is known of the processes that hold a rollout open.
type rolloutHolder int

const (
	holderUnknown rolloutHolder = iota // the system does not say
	holderNone                         // no process holds it (its thread ended)
	holderOurs                         // a process of this run's tree holds it
	holderOther                        // only processes of other trees hold it
)

func (h rolloutHolder) String() string {
	switch h {
	case holderNone:
		return "none"
	case holderOurs:
		return "this run"
	case holderOther:
		return "another process"
	}
	return "unknown"
}
