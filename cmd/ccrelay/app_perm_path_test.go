package main

// Browser tests of the permission card's path check (web/static/js/paths.js)
// and of what the card says once.

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// outsideProject (paths.js) says a path is outside the session's folder
// only when its name is: relative paths are in the folder, trailing
// separators, "." and ".." are resolved, macOS's /private/tmp is /tmp,
// Windows paths compare with either separator and in any case, and a path
// it cannot judge (no folder, "~") is never said to be outside.
func TestAppPathCheck(t *testing.T) {
	type pathCase struct {
		Name    string `json:"name"`
		Path    string `json:"path"`
		Cwd     string `json:"cwd"`
		Outside bool   `json:"outside"`
	}
	cases := []pathCase{
		{"file in the folder", "/home/dev/project/made.txt", "/home/dev/project", false},
		{"folder with a trailing slash", "/home/dev/project/made.txt", "/home/dev/project/", false},
		{"folder itself", "/home/dev/project", "/home/dev/project", false},
		{"folder itself with a slash", "/home/dev/project/", "/home/dev/project", false},
		{"nested file", "/home/dev/project/src/a/b.go", "/home/dev/project", false},
		{"doubled slashes", "/home/dev//project///made.txt", "/home/dev/project", false},
		{"relative file", "made.txt", "/home/dev/project", false},
		{"relative with dot", "./src/made.txt", "/home/dev/project", false},
		{"relative going up", "../other/made.txt", "/home/dev/project", true},
		{"relative up and back", "../project/made.txt", "/home/dev/project", false},
		{"dotdot inside", "/home/dev/project/src/../made.txt", "/home/dev/project", false},
		{"dotdot leaving", "/home/dev/project/../made.txt", "/home/dev/project", true},
		{"dotdot in the folder", "/home/dev/project/made.txt", "/home/dev/other/../project", false},
		{"sibling with the folder's name as prefix", "/home/dev/project2/made.txt", "/home/dev/project", true},
		{"elsewhere", "/etc/passwd", "/home/dev/project", true},
		{"parent", "/home/dev", "/home/dev/project", true},
		{"root", "/", "/home/dev/project", true},
		{"dotdot above the root", "/../../home/dev/project/made.txt", "/home/dev/project", false},
		{"macOS /private/tmp for /tmp", "/private/tmp/work/made.txt", "/tmp/work", false},
		{"macOS /tmp for /private/tmp", "/tmp/work/made.txt", "/private/tmp/work", false},
		{"macOS /private/var", "/private/var/folders/x/made.txt", "/var/folders/x", false},
		{"/private alone is not a link", "/private/home/made.txt", "/home", true},
		{"Windows backslashes", `C:\Users\dev\project\made.txt`, `C:\Users\dev\project`, false},
		{"Windows trailing backslash", `C:\Users\dev\project\made.txt`, `C:\Users\dev\project\`, false},
		{"Windows mixed separators", `C:/Users/dev/project\src/made.txt`, `C:\Users\dev\project`, false},
		{"Windows case", `c:\users\DEV\Project\made.txt`, `C:\Users\dev\project`, false},
		{"Windows relative", `src\made.txt`, `C:\Users\dev\project`, false},
		{"Windows dotdot leaving", `C:\Users\dev\project\..\made.txt`, `C:\Users\dev\project`, true},
		{"Windows other drive", `D:\Users\dev\project\made.txt`, `C:\Users\dev\project`, true},
		{"Windows long path prefix", `\\?\C:\Users\dev\project\made.txt`, `C:\Users\dev\project`, false},
		{"Windows share", `\\server\share\project\made.txt`, `\\server\share\project`, false},
		{"Windows other share", `\\server\other\project\made.txt`, `\\server\share\project`, true},
		{"no folder known", "/etc/passwd", "", false},
		{"home-relative path", "~/made.txt", "/home/dev/project", false},
		{"empty path", "", "/home/dev/project", false},
	}
	in, _ := json.Marshal(cases)
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the app", `!!document.querySelector('.top')`)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]bool](fmt.Sprintf(`import('/js/paths.js').then((p) => %s.map((c) => p.outsideProject(c.path, c.cwd)))`, in), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cases) {
		t.Fatalf("%d answers for %d cases", len(got), len(cases))
	}
	for i, c := range cases {
		if got[i] != c.Outside {
			t.Errorf("%s: outsideProject(%q, %q) = %v, want %v", c.Name, c.Path, c.Cwd, got[i], c.Outside)
		}
	}
}

// A permission card for a file in the project does not say it is outside
// the project (Claude Code names the path of every file request), one for a
// file elsewhere does; a description that is the command's own is said
// once, one that is not is said too.
func TestAppPermissionCardPathAndDescription(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"cwd": "/home/dev/project/", "machine": "laptop", "mode": "remote", "status": "idle"})
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	cli.announce(id, map[string]any{"cwd": "/home/dev/project/", "mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-in", "tool": "Write", "input": map[string]any{"file_path": "/home/dev/project/made.txt", "content": "x"}, "call": "toolu_1", "blockedPath": "/home/dev/project/made.txt"},
		{"id": "req-out", "tool": "Write", "input": map[string]any{"file_path": "/home/dev/project/../elsewhere/made.txt", "content": "x"}, "call": "toolu_2", "blockedPath": "/home/dev/project/../elsewhere/made.txt"},
		{"id": "req-bash", "tool": "Bash", "input": map[string]any{"command": "touch made.txt", "description": "Create made.txt"}, "call": "toolu_3", "description": "Create made.txt"},
		{"id": "req-why", "tool": "Bash", "input": map[string]any{"command": "ls"}, "call": "toolu_4", "description": "List the files"},
	}})
	waitJS(t, ctx, "the requests", `document.querySelectorAll('.perm').length === 4`)
	type card struct {
		Outside bool
		Made    int
		Created int
		Listed  int
	}
	got := eval[map[string]card](t, ctx, `Object.fromEntries([...document.querySelectorAll('.perm')].map((p) => {
		const text = p.innerText, count = (s) => text.split(s).length - 1;
		return [p.dataset.request, { outside: text.includes('Outside the project'), made: count('made.txt'), created: count('Create made.txt'), listed: count('List the files') }];
	}))`)
	if c := got["req-in"]; c.Outside {
		t.Errorf("a file in the project said to be outside it: %+v", c)
	}
	if c := got["req-out"]; !c.Outside {
		t.Errorf("a file outside the project not said to be: %+v", c)
	}
	if c := got["req-bash"]; c.Created != 1 {
		t.Errorf("the command's description said %d times, want once", c.Created)
	}
	if c := got["req-why"]; c.Listed != 1 {
		t.Errorf("the request's own description said %d times, want once", c.Listed)
	}
	screenshot(t, ctx, "permission-paths")
}
