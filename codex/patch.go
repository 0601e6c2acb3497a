package codex

import "strings"

// A patch is the text Codex's apply_patch tool takes (a freeform custom tool
// call's input):
//
//	*** Begin Patch
//	*** Add File: hello.txt
//	+hello
//	*** Update File: a.txt
//	*** Move to: b.txt
//	@@ def f():
//	-    return 1
//	+    return 2
//	*** Delete File: gone.txt
//	*** End Patch
//
// Its hunks carry no line numbers: "@@" is followed by a line of context
// to find the place, if anything. Line numbers come from the FileChange item
// Codex writes once the patch is applied (its unified diff).

// Patch operations.
const (
	PatchAdd    = "add"
	PatchDelete = "delete"
	PatchUpdate = "update"
)

// Bounds of ParsePatch: files and lines past them are left out and the
// patch is marked Truncated.
const (
	MaxPatchFiles = 1024
	MaxPatchLines = 100000
)

// Patch is a parsed apply_patch input.
type Patch struct {
	Files     []PatchFile
	Truncated bool
}

// PatchFile is one file of a patch.
type PatchFile struct {
	Op     string
	Path   string
	MoveTo string // update only: the file's new path, "" when not moved
	// Hunks of an update; an add has one hunk of "+" lines.
	Hunks []PatchHunk
}

// PatchHunk is a hunk of a patch: Context is what follows "@@" (may be
// empty), Lines start with ' ', '-' or '+'.
type PatchHunk struct {
	Context string
	Lines   []string
}

// ParsePatch reads a patch; ok is false when text does not start with
// "*** Begin Patch". It is lenient past that, as Codex is: unknown lines are
// skipped, a missing "*** End Patch" ends the patch at the text's end.
func ParsePatch(text string) (p Patch, ok bool) {
	text = strings.TrimLeft(text, " \t\r\n")
	if !strings.HasPrefix(text, "*** Begin Patch") {
		return p, false
	}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")[1:]
	var cur *PatchFile
	nlines := 0
	for _, l := range lines {
		if nlines >= MaxPatchLines {
			p.Truncated = true
			break
		}
		nlines++
		switch {
		case strings.HasPrefix(l, "*** End Patch"):
			return p, true
		case strings.HasPrefix(l, "*** Add File: "), strings.HasPrefix(l, "*** Delete File: "), strings.HasPrefix(l, "*** Update File: "):
			if len(p.Files) >= MaxPatchFiles {
				p.Truncated = true
				cur = nil
				continue
			}
			op, path, _ := strings.Cut(strings.TrimPrefix(l, "*** "), " File: ")
			p.Files = append(p.Files, PatchFile{Op: strings.ToLower(op), Path: strings.TrimSpace(path)})
			cur = &p.Files[len(p.Files)-1]
			if cur.Op == PatchAdd {
				cur.Hunks = []PatchHunk{{}}
			}
		case cur == nil:
		case strings.HasPrefix(l, "*** Move to: "):
			if cur.Op == PatchUpdate {
				cur.MoveTo = strings.TrimSpace(strings.TrimPrefix(l, "*** Move to: "))
			}
		case strings.HasPrefix(l, "*** End of File"):
		case cur.Op == PatchUpdate && strings.HasPrefix(l, "@@"):
			cur.Hunks = append(cur.Hunks, PatchHunk{Context: strings.TrimSpace(strings.TrimPrefix(l, "@@"))})
		case cur.Op == PatchAdd && strings.HasPrefix(l, "+"):
			cur.Hunks[0].Lines = append(cur.Hunks[0].Lines, l)
		case cur.Op == PatchUpdate && l != "" && strings.ContainsRune(" -+", rune(l[0])):
			if len(cur.Hunks) == 0 {
				cur.Hunks = append(cur.Hunks, PatchHunk{}) // a first hunk without "@@"
			}
			h := &cur.Hunks[len(cur.Hunks)-1]
			h.Lines = append(h.Lines, l)
		case cur.Op == PatchUpdate && l == "":
			// An empty context line written without its space.
			if len(cur.Hunks) > 0 {
				h := &cur.Hunks[len(cur.Hunks)-1]
				h.Lines = append(h.Lines, " ")
			}
		}
	}
	return p, true
}

// Paths lists the files a patch touches (a moved file by its new path), in
// order.
func (p *Patch) Paths() []string {
	out := make([]string, 0, len(p.Files))
	for _, f := range p.Files {
		if f.MoveTo != "" {
			out = append(out, f.MoveTo)
		} else {
			out = append(out, f.Path)
		}
	}
	return out
}
