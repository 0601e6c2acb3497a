// Package localca is a certificate authority of one machine's own, for a
// relay served on a LAN: it signs the relay's certificate for the names
// and addresses phones and this machine open (the LAN address and
// 127.0.0.1 alike), and a phone trusts it once (docs/deploy.md).
//
// The authority's key stays in the folder it is made in (mode 0600): with
// it anyone could make certificates the phone trusts, so it is kept as
// private as the relay's token, next to it. And the authority vouches for
// little: its name constraints let it sign only for a LAN's addresses and
// names (Lan) and the hosts it was made for, and only TLS servers; a
// stolen key cannot impersonate any other site to the phone.
package localca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/internal/durable"
)

// The files of a folder's authority and of the certificate it signed.
const (
	CAFile   = "lan-ca.pem"
	caKey    = "lan-ca.key"
	CertFile = "lan.crt"
	KeyFile  = "lan.key"
)

// Lifetimes: the authority lasts long (a phone trusts it once); the
// relay's certificate lasts under 398 days, what browsers and phones
// accept of a certificate, and is made again when less than Renew is left.
const (
	caLife   = 10 * 365 * 24 * time.Hour
	certLife = 397 * 24 * time.Hour
	Renew    = 30 * 24 * time.Hour
)

// Files are the paths of a folder's authority and certificate.
type Files struct {
	CA, CAKey, Cert, Key string
}

// Paths are the files of the folder dir.
func Paths(dir string) Files {
	return Files{CA: filepath.Join(dir, CAFile), CAKey: filepath.Join(dir, caKey), Cert: filepath.Join(dir, CertFile), Key: filepath.Join(dir, KeyFile)}
}

// Ensure makes the folder's authority if it has none, and a certificate it
// signs for hosts (names and IP addresses), unless the folder's current one
// was signed by it, covers every host and has more than Renew left. It
// reports whether it made a new certificate (a running relay must then read
// it again).
func Ensure(dir string, hosts []string, now time.Time) (Files, bool, error) {
	f := Paths(dir)
	if len(hosts) == 0 {
		return f, false, errors.New("the relay's certificate needs a name or address")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, false, fmt.Errorf("the local certificate authority: %w", err)
	}
	ca, key, err := loadCA(f)
	if errors.Is(err, fs.ErrNotExist) {
		ca, key, err = makeCA(f, hosts, now)
	}
	if err != nil {
		return f, false, err
	}
	if hosts, err = signable(f, ca, hosts); err != nil {
		return f, false, err
	}
	if current(f, ca, hosts, now) {
		return f, false, nil
	}
	if err := issue(f, ca, key, hosts, now); err != nil {
		return f, false, err
	}
	return f, true, nil
}

// Fingerprint is the SHA-256 of the authority's certificate, as phones show
// it (hex pairs, colons), for the person to compare before trusting it.
func Fingerprint(caFile string) (string, error) {
	c, err := readCert(caFile)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.Raw)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":"), nil
}

// Unconstrained reports whether the authority of caFile may sign for any
// name and address (one an earlier ccrelay made, before name constraints):
// a phone that trusts it trusts its key for every site.
func Unconstrained(caFile string) (bool, error) {
	c, err := readCert(caFile)
	if err != nil {
		return false, err
	}
	return len(c.PermittedIPRanges) == 0 && len(c.PermittedDNSDomains) == 0, nil
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// Lan is what the authority may sign besides the hosts it was made for:
// the addresses of private networks (RFC 1918, a tailnet's 100.64.0.0/10,
// link-local, loopback, IPv6 unique local) and the names only a local
// network resolves.
var Lan = struct {
	Prefixes []netip.Prefix
	Domains  []string
}{
	Prefixes: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fe80::/10"),
	},
	Domains: []string{"localhost", "local", "home.arpa", "internal", "lan"},
}

// constraints are the authority's name constraints for hosts: Lan, and
// each host outside it exactly.
func constraints(hosts []string) (ips []*net.IPNet, names []string) {
	for _, p := range Lan.Prefixes {
		ips = append(ips, prefixNet(p))
	}
	names = append(names, Lan.Domains...)
	for _, h := range hosts {
		if a, ok := hostAddr(h); ok {
			if !inLan(a) {
				ips = append(ips, prefixNet(netip.PrefixFrom(a, a.BitLen())))
			}
		} else if !nameInLan(h) {
			names = append(names, strings.ToLower(strings.TrimSuffix(h, ".")))
		}
	}
	return ips, names
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// hostAddr is h as an address, when it is one.
func hostAddr(h string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.Trim(h, "[]"))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func inLan(a netip.Addr) bool {
	for _, p := range Lan.Prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func nameInLan(h string) bool {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	for _, d := range Lan.Domains {
		if h == d || strings.HasSuffix(h, "."+d) {
			return true
		}
	}
	return false
}

// signable is hosts less the names ca may not sign (a name the machine
// took since the authority was made), or an error when ca may not sign
// the first host (the address phones open) or an address: a certificate
// for it would be refused by the phone.
func signable(f Files, ca *x509.Certificate, hosts []string) ([]string, error) {
	var ok []string
	for i, h := range hosts {
		if permitted(ca, h) {
			ok = append(ok, h)
			continue
		}
		if _, isAddr := hostAddr(h); i == 0 || isAddr {
			return nil, fmt.Errorf("this machine's certificate authority (%s) was made for other addresses and signs only a LAN's and those: %s is not one; remove %s and %s to make a new authority (then trust the new one on the phone), or reach the relay another way (Tailscale, --acme)", f.CA, h, f.CA, f.CAKey)
		}
	}
	return ok, nil
}

// permitted reports whether ca's name constraints let it sign for host
// (an authority without constraints signs any).
func permitted(ca *x509.Certificate, host string) bool {
	if a, ok := hostAddr(host); ok {
		if len(ca.PermittedIPRanges) == 0 {
			return true
		}
		for _, n := range ca.PermittedIPRanges {
			if p, ok := netip.AddrFromSlice(n.IP); ok {
				bits, _ := n.Mask.Size()
				if netip.PrefixFrom(p.Unmap(), bits-(p.BitLen()-p.Unmap().BitLen())).Contains(a) {
					return true
				}
			}
		}
		return false
	}
	if len(ca.PermittedDNSDomains) == 0 {
		return true
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, d := range ca.PermittedDNSDomains {
		d = strings.ToLower(d)
		if h == d || strings.HasSuffix(h, "."+d) {
			return true
		}
	}
	return false
}

func makeCA(f Files, hosts []string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, fmt.Errorf("the local certificate authority's key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{SerialNumber: sn,
		Subject:   pkix.Name{CommonName: "ccrelay local CA " + host + " " + now.UTC().Format("2006-01-02"), Organization: []string{"ccrelay"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLife),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		// What a phone that trusts it takes of it: TLS servers of the
		// LAN and of hosts only (critical: a client that does not know
		// name constraints refuses the authority rather than trust it
		// for every name).
		ExtKeyUsage:                 []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		PermittedDNSDomainsCritical: true}
	tmpl.PermittedIPRanges, tmpl.PermittedDNSDomains = constraints(hosts)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("the local certificate authority: %w", err)
	}
	if err := writeKey(f.CAKey, key); err != nil {
		return nil, nil, err
	}
	if err := durable.WriteFile(f.CA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, fmt.Errorf("the local certificate authority: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func loadCA(f Files) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	ca, err := readCert(f.CA)
	if err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(f.CAKey)
	if err != nil {
		return nil, nil, fmt.Errorf("the local certificate authority's key: %w (remove %s to make a new authority, then trust the new one on the phone)", err, f.CA)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, nil, fmt.Errorf("%s holds no PEM key: remove it and %s to make a new authority", f.CAKey, f.CA)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.CAKey, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, fmt.Errorf("%s is not the key of %s: remove both to make a new authority", f.CAKey, f.CA)
	}
	return ca, key, nil
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// current: the folder's certificate is signed by ca, covers every host,
// and has more than Renew left.
func current(f Files, ca *x509.Certificate, hosts []string, now time.Time) bool {
	c, err := readCert(f.Cert)
	if err != nil || now.Add(Renew).After(c.NotAfter) {
		return false
	}
	if _, err := os.Stat(f.Key); err != nil {
		return false
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, h := range hosts {
		if _, err := c.Verify(x509.VerifyOptions{DNSName: h, Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return false
		}
	}
	return true
}

func issue(f Files, ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string, now time.Time) error {
	key, err := newKey()
	if err != nil {
		return fmt.Errorf("the relay's key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLife),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("the relay's certificate: %w", err)
	}
	if err := writeKey(f.Key, key); err != nil {
		return err
	}
	// The chain: the relay's certificate, then the authority's.
	var chain bytes.Buffer
	pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	if err := durable.WriteFile(f.Cert, chain.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", f.Cert, err)
	}
	return nil
}
