package launcher

import "runtime"

// Which threads of a Codex run local mode can follow. A rollout is this
// run's when a process of this run holds it open (codex_holder.go): Codex
// writes a thread's rollout from the process that runs the thread, which
// is the TUI's own app server with --no-daemon (a child of the TUI), so
// every thread of the run is found, a thread started with /new too. By
// default the TUI uses Codex's shared background app server, which runs
// the threads of every TUI that uses it: nothing tells whose a thread is.
// Its rollouts' session_meta names no client (Codex 0.169.0 writes id,
// session_id, timestamp, cwd, runtime_workspace_roots, originator
// "codex-tui" for every TUI, cli_version, source "vscode", thread_source,
// model_provider, history_mode, account_scoped and a context_window id),
// app-server's protocol tells no client which connection started a
// thread (its generated schema's Thread has no such field; thread/loaded/list
// and thread/list list every TUI's threads), and the TUI itself holds no
// rollout, nor any other file of the thread, open (only its terminal and
// pipes: the server writes). So local
// mode follows only the first thread that began after the run started
// there, and leaves a later one alone rather than guess by folder and
// time (another TUI in the same folder may share the server).

// CodexFirstThreadOnly says why local mode follows only the first thread
// of a Codex run with args, "" when it follows each thread the run starts.
func CodexFirstThreadOnly(args []string) string {
	return codexFirstThreadOnly(args, runtime.GOOS)
}

func codexFirstThreadOnly(args []string, goos string) string {
	if originator, _ := codexRunKind(args); originator == CodexOriginatorExec {
		return "" // one thread per run
	}
	if goos != "linux" {
		return "on this system ccrelay cannot tell which process writes a thread"
	}
	if codexOption(args, "--no-daemon") {
		return ""
	}
	return "Codex's shared background app server, which the TUI uses by default, does not say which terminal started a thread (with ccrelay codex --no-daemon the TUI runs its own, and each thread is followed)"
}

// codexOption reports whether the option name is among Codex's options in
// args (not an option's value, nor past "--").
func codexOption(args []string, name string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return false
		case a == name:
			return true
		case len(a) > 1 && a[0] == '-' && codexValueFlag(a) && i+1 < len(args):
			i++
		}
	}
	return false
}
