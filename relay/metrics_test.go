package relay

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The metrics parse with Prometheus' text parser and count what was sent;
// they are not on the public handler; /healthz and /readyz answer without
// a token and say nothing else.
func TestMetrics(t *testing.T) {
	st := openTestStore(t, t.TempDir()+"/relay.db")
	rs := NewServer(st, nil, testToken)
	srv := httptest.NewServer(rs.Handler())
	defer srv.Close()
	msrv := httptest.NewServer(rs.MetricsHandler())
	defer msrv.Close()

	cli := dial(t, srv, "/ws/cli")
	envs := envelopes(s1, 0, 7)
	var bytes int
	for _, e := range envs {
		bytes += len(e)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envs})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envs[:3]}) // resent: not counted
	recv(t, cli)
	app := dial(t, srv, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	recv(t, app)
	// A prompt, carried out: one command done.
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: protocol.New(), Kind: protocol.CommandPrompt, Text: "go"}})
	for {
		f := recv(t, cli)
		if f.Type == protocol.FrameCommand {
			send(t, cli, protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: f.Command.ID}, Status: protocol.StatusDone})
			break
		}
	}
	for {
		if f := recv(t, cli); f.Type == protocol.FrameAck {
			break
		}
	}

	res, err := http.Get(msrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	value := func(name string, label ...string) float64 {
		t.Helper()
		f, ok := fams[name]
		if !ok {
			t.Fatalf("no metric %s", name)
		}
		for _, m := range f.Metric {
			match := true
			for i := 0; i+1 < len(label); i += 2 {
				found := false
				for _, l := range m.Label {
					if l.GetName() == label[i] && l.GetValue() == label[i+1] {
						found = true
					}
				}
				match = match && found
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("no %s %v", name, label)
		return 0
	}
	for _, c := range []struct {
		name  string
		label []string
		want  float64
	}{
		{"ccrelay_envelopes_in_total", nil, 7},
		{"ccrelay_envelope_bytes_in_total", nil, float64(bytes)},
		{"ccrelay_connections", []string{"role", "cli"}, 1},
		{"ccrelay_connections", []string{"role", "app"}, 1},
		{"ccrelay_connections_total", []string{"role", "app"}, 1},
		{"ccrelay_store_seconds", []string{"op", "append"}, 2},
		{"ccrelay_retention_deleted_total", nil, 0},
		{"ccrelay_commands_total", []string{"status", "done"}, 1},
	} {
		if got := value(c.name, c.label...); got != c.want {
			t.Errorf("%s %v = %v, want %v", c.name, c.label, got, c.want)
		}
	}
	if value("ccrelay_database_bytes") <= 0 {
		t.Error("database size not reported")
	}

	// Not on the public listener.
	for _, p := range []string{"/metrics", "/debug/vars"} {
		r, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if strings.Contains(string(b), "ccrelay_") || strings.Contains(string(b), "go_goroutines") {
			t.Fatalf("public %s serves metrics", p)
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		r, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK || string(b) != "ok\n" {
			t.Fatalf("%s: %d %q", p, r.StatusCode, b)
		}
	}
	st.Close()
	if r, err := http.Get(srv.URL + "/readyz"); err != nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the store closed: %v %v", r, err)
	}
}
