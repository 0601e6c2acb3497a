package launcher

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
)

var updateCompat = flag.Bool("update-compat", false, "write docs/compatibility.md from the real-Claude scenarios")

// compatDoc is the table of Claude Code versions × scenarios that
// TestRealClaudeVersions writes (-update-compat) and checks.
const compatDoc = "../docs/compatibility.md"

// versionScenario is a real-Claude scenario run against every installed
// Claude Code version (claudetest.Installs).
type versionScenario struct {
	name string
	// since is the oldest version the scenario applies to ("" for all);
	// older versions show "n/a" in the table.
	since string
	run   func(t *testing.T, in claudetest.Install)
	// note, if set, qualifies a passing cell for a version ("" for none).
	note func(version string) string
}

// versionScenarios are the scenarios of docs/compatibility.md.
func versionScenarios() []versionScenario {
	s := []versionScenario{
		{name: "plain reply", run: func(t *testing.T, in claudetest.Install) {
			e := claudetest.NewWith(t, in.Path, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("hi there")}})
			session := claude.NewSessionID()
			l := follow(t, e.ProjectDir(t), session)
			e.Run(t, nil, "-p", "say hi", "--session-id", session, "--output-format", "stream-json", "--verbose")
			d := liveEqualsReplay(t, l.stop(t), replayFiles(t, filepath.Join(e.ProjectDir(t), session+".jsonl")))
			wantInOrder(t, d, "U(say hi)", "TS", "A(hi there)")
		}},
		{name: "tool round trip", run: func(t *testing.T, in claudetest.Install) {
			e := claudetest.NewWith(t, in.Path,
				fakeapi.Rule{AfterToolResult: fakeapi.Bool(false), Reply: []fakeapi.Block{fakeapi.Text("Listing."), fakeapi.ToolUse("Bash", map[string]any{"command": "ls", "description": "List files"})}},
				fakeapi.Rule{AfterToolResult: fakeapi.Bool(true), Reply: []fakeapi.Block{fakeapi.Text("Two files.")}})
			session := claude.NewSessionID()
			l := follow(t, e.ProjectDir(t), session)
			e.Run(t, nil, "-p", "list files", "--session-id", session, "--dangerously-skip-permissions")
			d := liveEqualsReplay(t, l.stop(t), replayFiles(t, filepath.Join(e.ProjectDir(t), session+".jsonl")))
			wantInOrder(t, d, "U(list files)", "TS", "A(Listing.)", "TCS(", "TCE(", "A(Two files.)")
		}},
		{name: "resume", run: func(t *testing.T, in claudetest.Install) {
			e := claudetest.NewWith(t, in.Path, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("noted")}})
			session := claude.NewSessionID()
			l := follow(t, e.ProjectDir(t), session)
			e.Run(t, nil, "-p", "first", "--session-id", session)
			e.Run(t, nil, "-p", "second", "--resume", session)
			d := liveEqualsReplay(t, l.stop(t), replayFiles(t, filepath.Join(e.ProjectDir(t), session+".jsonl")))
			wantInOrder(t, d, "U(first)", "TS", "A(noted)", "TE(completed)", "U(second)", "TS", "A(noted)")
		}},
	}
	s = append(s, apiErrorScenarios()...)
	s = append(s,
		versionScenario{name: "API error in remote mode", run: realClaudeRemoteAPIError, note: noRetryTrace},
		// 2.1.197 does not compact a conversation this short ("Not enough
		// messages to compact.").
		versionScenario{name: "compaction (/compact)", since: "2.1.330", run: realClaudeCompaction},
		versionScenario{name: "Edit/Write diffs", run: realClaudeEditDiffs},
		versionScenario{name: "fork (--fork-session)", run: realClaudeFork},
		versionScenario{name: "plan mode: the plan's approval (remote mode)", run: realClaudeRemotePlan, note: planInputNote},
	)
	return append(s, terminalScenarios()...)
}

// hasRetryTrace reports whether version writes its API retries to the
// transcript as they happen; 2.1.197 writes them only with the message
// that follows them, and not at all when it exits first
// (claude.RetriesWrittenLate): ccrelay shows none of those (D18).
func hasRetryTrace(version string) bool { return !claude.RetriesWrittenLate(version) }

func noRetryTrace(version string) string {
	if hasRetryTrace(version) {
		return ""
	}
	return "retries written to the transcript late, after the message that follows them: not shown, live or replayed"
}

// planInputNote says how a version asks to leave plan mode.
func planInputNote(version string) string {
	if c, ok := claude.CompareVersions(version, "2.1.330"); ok && c >= 0 {
		return "asks with an empty input: the app is shown the plan of the tool call"
	}
	return ""
}

// The real-Claude scenarios of docs/compatibility.md against every
// installed Claude Code (CI: each pinned version in .ci/run). The table in
// the doc is what this test found; -update-compat writes it.
func TestRealClaudeVersions(t *testing.T) {
	installs := claudetest.Installs(t)
	scenarios := versionScenarios()
	results := map[string]map[string]string{} // scenario -> version -> cell
	for _, in := range installs {
		t.Run(in.Version, func(t *testing.T) {
			for _, sc := range scenarios {
				if results[sc.name] == nil {
					results[sc.name] = map[string]string{}
				}
				if c, ok := claude.CompareVersions(in.Version, sc.since); sc.since != "" && ok && c < 0 {
					results[sc.name][in.Version] = "n/a"
					continue
				}
				ok := t.Run(sc.name, func(t *testing.T) { sc.run(t, in) })
				cell := map[bool]string{true: "yes", false: "**fails**"}[ok]
				if ok && sc.note != nil {
					if n := sc.note(in.Version); n != "" {
						cell += " (" + n + ")"
					}
				}
				results[sc.name][in.Version] = cell
			}
		})
	}
	var versions []string
	for _, in := range installs {
		versions = append(versions, in.Version)
	}
	table := compatTable(versions, scenarios, results)
	doc, err := os.ReadFile(compatDoc)
	if err != nil && !(*updateCompat && errors.Is(err, os.ErrNotExist)) {
		t.Fatal(err)
	}
	// What follows the generated table (the Codex section) is written by
	// hand and kept.
	generated, rest := splitCompatDoc(string(doc))
	if *updateCompat {
		if err := os.WriteFile(compatDoc, []byte(table+rest), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	doc = []byte(generated)
	if docVersions := compatVersions(string(doc)); !slices.Equal(docVersions, versions) {
		msg := "docs/compatibility.md covers Claude Code " + strings.Join(docVersions, ", ") + "; installed here: " + strings.Join(versions, ", ")
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI must install each version the doc lists: .ci/run)")
		}
		t.Log(msg + ": the table is not compared")
		return
	}
	if string(doc) != table {
		t.Fatalf("docs/compatibility.md is not what the scenarios found: run go test ./launcher -run TestRealClaudeVersions -update-compat and review the diff\nfound:\n%s", table)
	}
}

const compatHead = `# Compatibility: Claude Code versions

Generated by ` + "`go test ./launcher -run TestRealClaudeVersions -update-compat`" + ` from
the real-Claude scenarios, run offline against the fake Messages API: each
cell says whether ccrelay's live output (local-mode scanner, or remote mode
where the scenario says so) equals ` + "`ccrelay replay`" + ` of the transcript Claude
wrote and holds what the scenario checks. CI runs every version that
` + "`.ci/run`" + ` pins (adding a version there is one line); the newest is
` + "`claude.TestedVersion`" + `, and ccrelay warns, in its log and in the session info
the app sees (` + "`claudeVersion`, `versionWarning`" + `), when it runs a newer Claude
Code. Do not edit the table by hand.

`

// compatTable renders the doc.
func compatTable(versions []string, scenarios []versionScenario, results map[string]map[string]string) string {
	var b strings.Builder
	b.WriteString(compatHead)
	b.WriteString("| scenario | " + strings.Join(versions, " | ") + " |\n|---|")
	b.WriteString(strings.Repeat("---|", len(versions)) + "\n")
	for _, sc := range scenarios {
		b.WriteString("| " + sc.name + " |")
		for _, v := range versions {
			b.WriteString(" " + results[sc.name][v] + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// compatHandWritten starts the part of the doc after the generated table.
const compatHandWritten = "\n## Codex CLI\n"

// splitCompatDoc cuts the doc into its generated part and the hand-written
// rest (from compatHandWritten; "" without one).
func splitCompatDoc(doc string) (generated, rest string) {
	if i := strings.Index(doc, compatHandWritten); i >= 0 {
		return doc[:i], doc[i:]
	}
	return doc, ""
}

// compatVersions reads the versions of the doc's table header.
func compatVersions(doc string) []string {
	for _, l := range strings.Split(doc, "\n") {
		if rest, ok := strings.CutPrefix(l, "| scenario |"); ok {
			var out []string
			for _, c := range strings.Split(strings.Trim(rest, " |"), "|") {
				if c = strings.TrimSpace(c); c != "" {
					out = append(out, c)
				}
			}
			return out
		}
	}
	return nil
}

// The doc is the generated table, then the hand-written Codex section,
// which -update-compat keeps: cut there, the generated part is what
// TestRealClaudeVersions compares.
func TestCompatDocSections(t *testing.T) {
	doc, err := os.ReadFile(compatDoc)
	if err != nil {
		t.Fatal(err)
	}
	generated, rest := splitCompatDoc(string(doc))
	if !strings.HasPrefix(generated, compatHead) || len(compatVersions(generated)) == 0 || strings.Contains(generated, "Codex") {
		t.Fatalf("the generated part is not the table alone:\n%s", generated)
	}
	if !strings.HasPrefix(rest, compatHandWritten) || !strings.Contains(rest, "0.169.0") {
		t.Fatalf("no Codex section after the table:\n%s", rest)
	}
}
