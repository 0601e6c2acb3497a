package apiclient

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/seal"
)

// A sealed session's agent and its version live where its model does:
// in the sealed summary, unreadable to the relay.
func TestSealedInfoHidesAgent(t *testing.T) {
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, err := OpenKeyring(t.TempDir(), machine)
	if err != nil {
		t.Fatal(err)
	}
	kr.Trust(TrustedDevice{ID: "d1", Name: "phone", PublicKey: make([]byte, 32)})
	info := json.RawMessage(`{"mode":"local","status":"idle","model":"gpt-5.5","agent":"codex","agentVersion":"0.169.0"}`)
	out, err := kr.SealInfo(sessA, info)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"codex", "0.169.0", "gpt-5.5"} {
		if strings.Contains(string(out), s) {
			t.Errorf("the relay reads %q in %s", s, out)
		}
	}
	var a struct{ Sealed string }
	json.Unmarshal(out, &a)
	key, _ := kr.SessionKey(sessA)
	plain, err := key.Open(seal.AD{Session: sessA, ID: "announce", Direction: seal.FromMachine}, a.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Agent, AgentVersion, Model string }
	if err := json.Unmarshal(plain, &m); err != nil || m.Agent != "codex" || m.AgentVersion != "0.169.0" || m.Model != "gpt-5.5" {
		t.Fatalf("opened %s (%v)", plain, err)
	}
}
