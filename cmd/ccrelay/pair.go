package main

import (
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/seal"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"rsc.io/qr"
)

// machineFlags are how pair and devices find the relay and this machine's
// credential.
type machineFlags struct {
	relay, tokenFile, data, state, ca string
}

func addMachineFlags(cmd *cobra.Command, f *machineFlags) {
	cmd.Flags().StringVar(&f.relay, "relay", "", "the relay's URL (default: $CCRELAY_RELAY, the remembered relay, the one of ccrelay login, or the relay on this machine at http://"+DefaultListen+")")
	cmd.Flags().StringVar(&f.ca, "ca", "", "a PEM file of the authority that signed the relay's certificate, when this machine does not trust it (remembered with the relay)")
	cmd.Flags().StringVar(&f.tokenFile, "relay-token-file", "", "a file holding this machine's credential or the relay's token")
	cmd.Flags().StringVar(&f.data, "data", "", "the data folder of a relay on this machine (for its token)")
	cmd.Flags().StringVar(&f.state, "state", "", "state folder (default $XDG_STATE_HOME/ccrelay)")
}

// resolve returns the relay URL and the credential to call it with.
func (f *machineFlags) resolve(stderr io.Writer) (string, string, error) {
	dir, err := stateDir(f.state)
	if err != nil {
		return "", "", err
	}
	if f.ca != "" {
		if err := trustCA(f.ca); err != nil {
			return "", "", err
		}
	}
	url, _, err := chooseRelay(f.relay, dir)
	if err != nil {
		return "", "", err
	}
	l, lerr := readLogin(dir)
	if url == "" {
		url = "http://" + DefaultListen
		if lerr == nil {
			url = l.Relay
		}
	}
	if f.tokenFile == "" && lerr == nil && l.Relay == url {
		return url, l.Credential, nil
	}
	// Pair runs on the relay's machine: its token file is meant, whatever
	// name the relay is reached by.
	data := f.data
	if data == "" {
		if data, err = dataDir(""); err != nil {
			return "", "", err
		}
	}
	tok, err := relayToken("", f.tokenFile, data, dir, url, stderr)
	return url, tok, err
}

func newPairCmd() *cobra.Command {
	var mf machineFlags
	var asMachine, noWait bool
	cmd := &cobra.Command{
		Use:   "pair",
		Short: "Pair a phone (QR code) or another machine (--machine) with the relay",
		Long: `Pair asks the relay for a one-time code (it works once, within 5 minutes) and
prints a QR code of the link that pairs a phone: scan it, and the phone gets
a credential of its own and makes a key pair that never leaves it. The link's
#fragment, which the browser never sends, carries the code, this machine's
public key and a one-time secret. Pair then waits for the phone, checks with
the secret that the relay passed both keys on unchanged, waits for the
phone's proof that it accepted this machine's key, and only then trusts the
phone: from then on this machine seals its sessions for it (end-to-end
encryption). If the phone refuses, or its proof does not come or does not
match, the pairing failed: the relay's credential for the phone is removed. With --no-wait it prints the link and exits (the phone is paired
but not trusted). With --machine it prints a code for "ccrelay login" on
another machine instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, cred, err := mf.resolve(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			dir, err := stateDir(mf.state)
			if err != nil {
				return err
			}
			key, err := machineKey(dir)
			if err != nil {
				return err
			}
			role := "device"
			if asMachine {
				role = "machine"
			}
			ans, err := requestPairCode(cmd.Context(), url, cred, role, key)
			if err != nil {
				return err
			}
			// The relay answered with this credential: it becomes this
			// machine's relay.
			if err := rememberRelay(dir, url, caToRemember(mf.ca, url), cmd.ErrOrStderr()); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			until := time.UnixMilli(ans.Expires).Format("15:04")
			if asMachine {
				fmt.Fprintf(out, "On the other machine, within 5 minutes (until %s), run:\n\n  ccrelay login %s %s\n\n", until, ans.URL, ans.Code)
				return nil
			}
			_, err = pairPhone(cmd.Context(), out, cmd.ErrOrStderr(), dir, key, url, cred, ans, noWait)
			return err
		},
	}
	addMachineFlags(cmd, &mf)
	cmd.Flags().BoolVar(&asMachine, "machine", false, "make a code for another machine (ccrelay login) instead of a phone")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "print the link and exit, without waiting to confirm the device's key (it then gets no session keys)")
	return cmd
}

// pairCode is the relay's answer to POST /api/pair.
type pairCode struct {
	Code    string `json:"code"`
	Expires int64  `json:"expires"`
	URL     string `json:"url"`
}

// requestPairCode asks the relay at url for a one-time code that pairs a
// device or (role "machine") another machine with this machine's key.
func requestPairCode(ctx context.Context, url, cred, role string, key *ecdh.PrivateKey) (pairCode, error) {
	var ans pairCode
	err := relayCall(ctx, "POST", url+"/api/pair", cred, map[string]any{"role": role, "machineKey": key.PublicKey().Bytes()}, &ans)
	return ans, err
}

// pairPhone prints the QR code and link of ans for a phone and, unless
// noWait, waits for it to pair and confirms its key (it then gets this
// machine's session keys). It returns the device's name ("" when not
// waiting).
func pairPhone(ctx context.Context, out, errOut io.Writer, dir string, key *ecdh.PrivateKey, url, cred string, ans pairCode, noWait bool) (string, error) {
	until := time.UnixMilli(ans.Expires).Format("15:04")
	// The link's secret never reaches the relay: with it the device
	// proves which public key it sent (docs/security.md).
	secret := seal.NewPairingSecret()
	link := pairLink(ans.URL, ans.Code, base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()), secret)
	if !strings.HasPrefix(link, "https://") {
		fmt.Fprintf(errOut, "ccrelay: warning: the relay is not reached over HTTPS (%s): a phone cannot use it; see docs/deploy.md\n", ans.URL)
	}
	if err := printQR(out, link); err != nil {
		return "", err
	}
	fmt.Fprintf(out, "\nScan this with the phone's camera, or open:\n  %s\nThe code works once, until %s.\n", link, until)
	if noWait {
		fmt.Fprintln(out, "Not waiting: this machine will not seal sessions for that device (run ccrelay pair again and wait to confirm one).")
		return "", nil
	}
	fmt.Fprintln(out, "Waiting for the device to pair (Ctrl-C stops waiting)…")
	wctx, cancel := context.WithDeadline(ctx, time.UnixMilli(ans.Expires))
	defer cancel()
	res, err := waitPairResult(wctx, url, cred, ans.Code, errOut, func(pairResult) bool { return true })
	if errors.Is(err, context.Canceled) {
		return "", errors.New("stopped waiting: a device may still pair with this code, but this machine will not trust it (run ccrelay pair again and wait)")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "", errors.New("the code expired before a device used it")
	}
	if err != nil {
		return "", fmt.Errorf("waiting for the device: %w", err)
	}
	kr, err := apiclient.OpenKeyring(dir, key)
	if err != nil {
		return "", err
	}
	if err := confirmPaired(ctx, errOut, kr, url, cred, ans.Code, secret, res); err != nil {
		return "", err
	}
	fmt.Fprintf(out, "Paired %q: its key is confirmed, and it accepted this machine's key; sessions this machine sends from now on are sealed for it.\n", res.Name)
	return res.Name, nil
}

// pairLink is the link a phone opens: the relay's address with the code,
// the machine's public key and the pairing secret in the fragment (which
// the browser never sends).
func pairLink(base, code, machineKey, secret string) string {
	return strings.TrimSuffix(base, "/") + "/#pair=" + code + "." + machineKey + "." + secret
}

// PairPoll is how often ccrelay pair asks the relay whether the code was
// redeemed.
const PairPoll = 500 * time.Millisecond

// pairResult is the relay's GET /api/pair/result.
type pairResult struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	PublicKey []byte `json:"publicKey"`
	Confirm   []byte `json:"confirm"`
	Accepted  []byte `json:"accepted"`
	Refused   string `json:"refused"`
}

// PairAnswerWait bounds how long ccrelay pair waits, once the code was
// redeemed, for the device's acceptance of the machine key (it sends it at
// once, one request after the redemption).
const PairAnswerWait = time.Minute

// pairAnswerWait is PairAnswerWait (shorter in tests).
var pairAnswerWait = PairAnswerWait

// PairUnreachable bounds how long ccrelay pair goes on asking a relay
// that does not answer while it waits for the device: a relay that
// restarts answers again within it.
const PairUnreachable = 20 * time.Second

// pairUnreachable is PairUnreachable (shorter in tests).
var pairUnreachable = PairUnreachable

// pairAsk bounds one question to the relay while pair waits: a relay that
// takes the connection but never answers counts as not answering.
const pairAsk = 10 * time.Second

// waitPairResult asks the relay every PairPoll what became of code, until
// it was redeemed and done says the result is complete, or ctx ends (its
// error is then returned as it is). A relay that cannot be reached is said
// on notice (nil: not said), once, and asked again for up to
// pairUnreachable; after that, or at once for a certificate this machine
// does not trust, the wait ends with an *apiclient.ReachError. A refusal
// or an answer that is not one ends it too.
func waitPairResult(ctx context.Context, base, cred, code string, notice io.Writer, done func(pairResult) bool) (pairResult, error) {
	var failing time.Time // since when the relay has not answered; zero while it does
	for {
		r, redeemed, err := askPairResult(ctx, base, cred, code)
		var reach *apiclient.ReachError
		switch {
		case ctx.Err() != nil:
			return pairResult{}, ctx.Err()
		case errors.As(err, &reach):
			if apiclient.CertificateError(err) {
				return pairResult{}, err
			}
			if failing.IsZero() {
				failing = time.Now()
				if notice != nil {
					fmt.Fprintf(notice, "ccrelay: %v; asking again for up to %v\n", err, pairUnreachable)
				}
			} else if time.Since(failing) >= pairUnreachable {
				return pairResult{}, err
			}
		case err != nil:
			return pairResult{}, err
		default:
			if !failing.IsZero() && notice != nil {
				fmt.Fprintln(notice, "ccrelay: the relay answers again")
			}
			failing = time.Time{}
			if redeemed && done(r) {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return pairResult{}, ctx.Err()
		case <-time.After(PairPoll):
		}
	}
}

// askPairResult asks the relay once what became of code: the result once
// it was redeemed. A relay that could not be asked (or whose answer was
// cut) is an *apiclient.ReachError.
func askPairResult(ctx context.Context, base, cred, code string) (pairResult, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, pairAsk)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/pair/result?code="+neturl.QueryEscape(code), nil)
	if err != nil {
		return pairResult{}, false, fmt.Errorf("ask the relay for the pairing: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return pairResult{}, false, &apiclient.ReachError{URL: base, Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return pairResult{}, false, &apiclient.ReachError{URL: base, Err: err}
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var r pairResult
		if err := json.Unmarshal(b, &r); err != nil {
			return r, false, fmt.Errorf("relay answer: %w", err)
		}
		return r, true, nil
	case http.StatusAccepted:
		return pairResult{}, false, nil
	}
	if gw := apiclient.Gateway(resp.StatusCode); gw != nil {
		return pairResult{}, false, &apiclient.ReachError{URL: base, Err: gw} // the relay behind a proxy is down: asked again
	}
	return pairResult{}, false, &relayError{status: resp.StatusCode, text: fmt.Sprintf("relay refused (%s): %s", resp.Status, strings.TrimSpace(string(b)))}
}

// confirmPaired trusts the device that redeemed code only once both ends
// agree: its confirmation matches this machine's key and the key the relay
// passed on, and it then proved, with a tag only the link's secret makes,
// that it accepted this machine's key (a device that refused says so, and
// one whose proof does not come within PairAnswerWait is not trusted).
// Otherwise the pairing failed, and the device's credential is removed
// from the relay, so that neither end keeps half of it. notice hears of a
// relay that does not answer meanwhile (waitPairResult).
func confirmPaired(ctx context.Context, notice io.Writer, kr *apiclient.Keyring, base, cred, code, secret string, res pairResult) error {
	fail := func(why string) error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
		defer cancel()
		err := relayCall(rctx, "POST", base+"/api/devices/revoke", cred, map[string]string{"name": res.ID}, nil)
		var re *relayError
		if err != nil && !(errors.As(err, &re) && re.status == http.StatusNotFound) {
			return fmt.Errorf("pairing %q failed: %s; its credential could not be removed from the relay (%v): remove it with ccrelay devices revoke %q", res.Name, why, err, res.Name)
		}
		return fmt.Errorf("pairing %q failed: %s; the relay's credential for it was removed (run ccrelay pair again)", res.Name, why)
	}
	dev, err := checkPaired(secret, kr.Machine().Public(), res)
	if err != nil {
		return fail(err.Error())
	}
	wctx, cancel := context.WithTimeout(ctx, pairAnswerWait)
	defer cancel()
	ans, err := waitPairResult(wctx, base, cred, code, notice, func(r pairResult) bool { return len(r.Accepted) > 0 || r.Refused != "" })
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fail(fmt.Sprintf("it did not confirm, within %v, that it accepted this machine's key (an app too old, or closed too soon)", pairAnswerWait))
	case errors.Is(err, context.Canceled):
		return fail("stopped waiting for it to accept this machine's key")
	case err != nil:
		return fail("waiting for it to accept this machine's key: " + err.Error())
	case ans.Refused != "":
		return fail("the device refused this machine's key: " + ans.Refused)
	}
	_, confirm, err := seal.PairingKeys(secret)
	if err != nil {
		return fail(err.Error())
	}
	tag := base64.RawURLEncoding.EncodeToString(ans.Accepted)
	if err := seal.CheckConfirm(confirm, seal.RoleDeviceAccepted, kr.Machine().Public(), dev, tag); err != nil {
		return fail("its acceptance of this machine's key does not match: it was not made by the device with the link's secret (the relay, or someone on the way, changed it)")
	}
	return kr.Trust(apiclient.TrustedDevice{ID: res.ID, Name: res.Name, PublicKey: res.PublicKey, Added: time.Now().UnixMilli()})
}

// checkPaired checks the device's confirmation tag with the link's secret:
// the relay cannot have changed either public key on the way. It returns
// the device's public key.
func checkPaired(secret string, machine *ecdh.PublicKey, res pairResult) (*ecdh.PublicKey, error) {
	if len(res.PublicKey) == 0 {
		return nil, errors.New("it paired without a key (an older app?): it would get no session keys")
	}
	dev, err := ecdh.X25519().NewPublicKey(res.PublicKey)
	if err != nil {
		return nil, errors.New("it sent a key that is not an X25519 public key")
	}
	_, confirm, err := seal.PairingKeys(secret)
	if err != nil {
		return nil, err
	}
	tag := base64.RawURLEncoding.EncodeToString(res.Confirm)
	if err := seal.CheckConfirm(confirm, seal.RoleDevice, machine, dev, tag); err != nil {
		return nil, errors.New("its confirmation does not match this machine's key and the key the relay passed on; the relay (or someone on the way) changed a key")
	}
	return dev, nil
}

// qrQuiet is the quiet zone around the printed QR code, in modules (the
// standard asks for 4).
const qrQuiet = 4

// printQR prints text as a QR code with half blocks, two modules a line:
// on a terminal black on white whatever the terminal's colours; to
// anything else (a file, a pipe, a CI log) as plain text, without the
// escape sequences that set the colours.
func printQR(w io.Writer, text string) error {
	code, err := qr.Encode(text, qr.M)
	if err != nil {
		return fmt.Errorf("QR code: %w", err)
	}
	fmt.Fprint(w, qrText(code.Size, code.Black, writesToTerminal(w)))
	return nil
}

// writesToTerminal reports whether w is a terminal.
func writesToTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// qrText renders a size×size module matrix (black reports a dark module)
// with its quiet zone, each line black on white when colour is set.
func qrText(size int, black func(x, y int) bool, colour bool) string {
	dark := func(x, y int) bool {
		x, y = x-qrQuiet, y-qrQuiet
		return x >= 0 && y >= 0 && x < size && y < size && black(x, y)
	}
	var b strings.Builder
	n := size + 2*qrQuiet
	for y := 0; y < n; y += 2 {
		if colour {
			b.WriteString("\x1b[30;47m")
		}
		for x := 0; x < n; x++ {
			top, bottom := dark(x, y), y+1 < n && dark(x, y+1)
			switch {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteString(" ")
			}
		}
		if colour {
			b.WriteString("\x1b[0m")
		}
		b.WriteString("\n")
	}
	return b.String()
}
