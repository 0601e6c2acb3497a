// Package config is ccrelay's own configuration, kept in the state folder:
// which relay sessions go to when no --relay is given, and how to trust its
// certificate. The file is small JSON, versioned, written atomically with
// mode 0600 (docs/install.md, "The remembered relay").
package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/ccrelay/ccrelay/internal/durable"
)

// File is the configuration's name in the state folder.
const File = "config.json"

// Version is the version of the file this ccrelay writes and reads. A file
// of a later version is refused rather than misread.
const Version = 1

// EnvRelay names the environment variable that overrides the remembered
// relay (and is overridden by --relay).
const EnvRelay = "CCRELAY_RELAY"

// maxFile bounds what Load reads: the file holds two short strings.
const maxFile = 64 << 10

// Config is the content of the state folder's config.json.
type Config struct {
	Version int `json:"version"`
	// Relay is the URL of the relay sessions go to by default, as given
	// to ccrelay pair or ccrelay login (no trailing slash).
	Relay string `json:"relay,omitempty"`
	// CAFile is a PEM file of the certificate authority that signed the
	// relay's certificate, when the system's do not (--ca, or
	// SSL_CERT_FILE when the relay was recorded).
	CAFile string `json:"caFile,omitempty"`
}

// Path is the configuration file of the state folder state.
func Path(state string) string { return filepath.Join(state, File) }

// Load reads the state folder's configuration. A missing file is an empty
// configuration, not an error.
func Load(state string) (Config, error) {
	p := Path(state)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read ccrelay's configuration: %w", err)
	}
	if len(b) > maxFile {
		return Config{}, fmt.Errorf("%s is larger than %d bytes: not ccrelay's configuration; remove it and run ccrelay pair or ccrelay login again", p, maxFile)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("%s is not valid JSON (%v): fix or remove it, then run ccrelay pair or ccrelay login again", p, err)
	}
	if c.Version > Version {
		return Config{}, fmt.Errorf("%s is of version %d, made by a newer ccrelay (this one reads version %d): update ccrelay", p, c.Version, Version)
	}
	return c, nil
}

// Save writes c as the state folder's configuration, atomically, mode 0600.
func Save(state string, c Config) error {
	c.Version = Version
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("ccrelay's configuration: %w", err)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return fmt.Errorf("save ccrelay's configuration: %w", err)
	}
	if err := durable.WriteFile(Path(state), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save ccrelay's configuration: %w", err)
	}
	return nil
}

// Remember records relay (and the CA file that trusts its certificate,
// "" for none) as the state folder's relay, keeping the rest of the file.
func Remember(state, relay, caFile string) error {
	c, err := Load(state)
	if err != nil {
		return err
	}
	c.Relay, c.CAFile = relay, caFile
	return Save(state, c)
}

// Source says where the relay URL in use came from.
type Source string

const (
	FromFlag   Source = "--relay"
	FromEnv    Source = EnvRelay
	FromConfig Source = "config"
	FromNone   Source = ""
)

// Resolve chooses the relay: --relay (flag) wins, then $CCRELAY_RELAY, then
// the remembered one. An empty URL (FromNone) means no relay is set up.
func Resolve(flag string, getenv func(string) string, c Config) (string, Source) {
	switch {
	case flag != "":
		return flag, FromFlag
	case getenv(EnvRelay) != "":
		return getenv(EnvRelay), FromEnv
	case c.Relay != "":
		return c.Relay, FromConfig
	}
	return "", FromNone
}

// TrustCA adds the certificates of the PEM file caFile to those t trusts
// (the system's), for a relay whose certificate a private authority signed.
func TrustCA(t *http.Transport, caFile string) error {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("the relay's CA file: %w (run ccrelay pair or ccrelay login again with --ca FILE)", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return fmt.Errorf("the relay's CA file %s holds no PEM certificate", caFile)
	}
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	t.TLSClientConfig.RootCAs = pool
	return nil
}
