package codex_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/codextest"
)

// schemaKept is the part of `codex app-server generate-json-schema
// --experimental` kept in testdata/<version>/schema (experimental, as
// ccrelay's client declares experimentalApi, which brings fields such as
// turn/start's collaborationMode and the currentTime/read server request;
// the whole is 6.1 MB, mostly methods ccrelay never calls): every server request and its response (ServerRequest.json
// and the top-level *Params/*Response files), every notification
// (ServerNotification.json), the JSON-RPC envelope, and the client methods
// ccrelay calls.
var schemaKept = []string{
	"v1/InitializeParams.json", "v1/InitializeResponse.json",
	"v2/ThreadStartParams.json", "v2/ThreadStartResponse.json",
	"v2/ThreadResumeParams.json", "v2/ThreadResumeResponse.json",
	"v2/TurnStartParams.json", "v2/TurnStartResponse.json",
	"v2/TurnInterruptParams.json", "v2/TurnInterruptResponse.json",
	"v2/TurnSteerParams.json", "v2/TurnSteerResponse.json",
}

// schemaDropped are top-level files not kept: the two bundles of
// everything, every client request, and the fuzzy file search ccrelay does
// not offer.
func schemaDropped(name string) bool {
	return strings.HasSuffix(name, ".schemas.json") || name == "ClientRequest.json" || strings.HasPrefix(name, "FuzzyFileSearch")
}

// keptSchema lists the files of a generated schema folder to keep.
func keptSchema(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") && !schemaDropped(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return append(out, schemaKept...)
}

// TestRealCodexSchema checks testdata/<version>/schema against what the
// installed Codex's `app-server generate-json-schema` emits, file by file,
// and that every server request type has its params and response there
// (a new one fails here: ccrelay must answer it); -update-codex rewrites it.
func TestRealCodexSchema(t *testing.T) {
	e := codextest.Home(t, "http://127.0.0.1:9")
	e.Codex = codextest.Binary(t)
	gen := filepath.Join(e.Root, "schema")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := e.Command(ctx, "app-server", "generate-json-schema", "--experimental", "--out", gen).CombinedOutput(); err != nil {
		t.Fatalf("generate-json-schema: %v\n%s", err, out)
	}
	dir := filepath.Join("testdata", codex.TestedVersion, "schema")
	kept := keptSchema(t, gen)
	if *updateCodex {
		for _, name := range kept {
			b, err := os.ReadFile(filepath.Join(gen, name))
			if err != nil {
				t.Fatal(err)
			}
			writeFixture(t, filepath.Join(dir, name), b)
		}
	}
	for _, name := range kept {
		got, err := os.ReadFile(filepath.Join(gen, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%v (go test ./codex -run TestRealCodexSchema -update-codex writes it)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what Codex %s generates", name, codex.TestedVersion)
		}
	}

	// Every server request has its params and response kept.
	b, err := os.ReadFile(filepath.Join(dir, "ServerRequest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sr struct {
		OneOf []struct {
			Properties struct {
				Method struct {
					Enum []string `json:"enum"`
				} `json:"method"`
				Params struct {
					Ref string `json:"$ref"`
				} `json:"params"`
			} `json:"properties"`
		} `json:"oneOf"`
	}
	if err := json.Unmarshal(b, &sr); err != nil {
		t.Fatal(err)
	}
	if len(sr.OneOf) == 0 {
		t.Fatal("ServerRequest.json lists no requests")
	}
	for _, r := range sr.OneOf {
		ref := strings.TrimPrefix(r.Properties.Params.Ref, "#/definitions/")
		if ref == "" {
			t.Errorf("server request %v has no params type", r.Properties.Method.Enum)
			continue
		}
		for _, f := range []string{ref + ".json", strings.TrimSuffix(ref, "Params") + "Response.json"} {
			if !slices.Contains(kept, f) {
				t.Errorf("server request %v: %s is not kept", r.Properties.Method.Enum, f)
			}
		}
	}
}
