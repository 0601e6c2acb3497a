package launcher

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// describePermissions says in a line what a Codex permission profile
// (additionalPermissions of a command request, permissions of a
// permissions request) grants, the most far-reaching first: writes, the
// network, reads, then what it denies. The request's description starts
// with it, and lists keep a description's first 256 bytes
// (protocol.SummaryStringBytes/4) and drop a long input's other members:
// as JSON, a write named after a few reads was cut out of what the app
// shows. A profile it cannot read is given as its JSON.
func describePermissions(raw json.RawMessage) string {
	var p struct {
		FileSystem *struct {
			Read    []string `json:"read"`
			Write   []string `json:"write"`
			Entries []struct {
				Access string `json:"access"`
				Path   struct {
					Type    string `json:"type"`
					Path    string `json:"path"`
					Pattern string `json:"pattern"`
					Value   struct {
						Kind    string `json:"kind"`
						Path    string `json:"path"`
						Subpath string `json:"subpath"`
					} `json:"value"`
				} `json:"path"`
			} `json:"entries"`
		} `json:"fileSystem"`
		Network *struct {
			Enabled *bool `json:"enabled"`
		} `json:"network"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return clip(string(raw), 1000)
	}
	by := map[string][]string{}
	if fs := p.FileSystem; fs != nil {
		by["write"] = append(by["write"], fs.Write...)
		by["read"] = append(by["read"], fs.Read...)
		for _, e := range fs.Entries {
			where := e.Path.Path
			switch e.Path.Type {
			case "glob_pattern":
				where = "files matching " + e.Path.Pattern
			case "special":
				where = specialPath(e.Path.Value.Kind, e.Path.Value.Path, e.Path.Value.Subpath)
			}
			if where == "" {
				where = "a path it does not name"
			}
			access := e.Access
			if access != "write" && access != "read" && access != "deny" {
				access = "access " + clip(access, 20) + " to"
			}
			by[access] = append(by[access], where)
		}
	}
	var parts []string
	add := func(label string, paths []string) {
		if len(paths) == 0 {
			return
		}
		for i := range paths {
			paths[i] = clip(paths[i], 200)
		}
		parts = append(parts, label+" "+strings.Join(paths, ", "))
	}
	add("write", by["write"])
	if p.Network != nil && p.Network.Enabled != nil && *p.Network.Enabled {
		parts = append(parts, "network access")
	}
	add("read", by["read"])
	for _, k := range slices.Sorted(maps.Keys(by)) {
		if k != "write" && k != "read" && k != "deny" {
			add(k, by[k])
		}
	}
	add("deny", by["deny"])
	if len(parts) == 0 {
		return clip(string(raw), 1000)
	}
	return clip(strings.Join(parts, "; "), 1000)
}

// specialPath names one of Codex's special paths.
func specialPath(kind, path, subpath string) string {
	var s string
	switch kind {
	case "root":
		s = "the whole file system (/)"
	case "minimal":
		s = "the minimal system paths"
	case "project_roots":
		s = "the project's folders"
	case "tmpdir":
		s = "the temporary folder"
	case "slash_tmp":
		s = "/tmp"
	default:
		s = path
		if s == "" {
			s = "a special path (" + clip(kind, 40) + ")"
		}
	}
	if subpath != "" {
		s += " " + subpath
	}
	return s
}
