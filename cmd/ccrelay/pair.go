package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"rsc.io/qr"
)

// machineFlags are how pair and devices find the relay and this machine's
// credential.
type machineFlags struct {
	relay, tokenFile, data, state string
}

func addMachineFlags(cmd *cobra.Command, f *machineFlags) {
	cmd.Flags().StringVar(&f.relay, "relay", "", "the relay's URL (default: the one of ccrelay login, or the relay on this machine at http://"+DefaultListen+")")
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
	url := strings.TrimSuffix(f.relay, "/")
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
	tok, err := relayToken("", f.tokenFile, f.data, stderr)
	return url, tok, err
}

func newPairCmd() *cobra.Command {
	var mf machineFlags
	var asMachine bool
	cmd := &cobra.Command{
		Use:   "pair",
		Short: "Pair a phone (QR code) or another machine (--machine) with the relay",
		Long: `Pair asks the relay for a one-time code (it works once, within 5 minutes) and
prints a QR code of the link that pairs a phone: scan it, and the phone gets
a credential of its own. The code travels in the link's #fragment, which the
browser never sends. With --machine it prints a code for "ccrelay login" on
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
			var ans struct {
				Code    string `json:"code"`
				Expires int64  `json:"expires"`
				URL     string `json:"url"`
			}
			if err := relayCall(cmd.Context(), "POST", url+"/api/pair", cred, map[string]any{"role": role, "machineKey": key.PublicKey().Bytes()}, &ans); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			until := time.UnixMilli(ans.Expires).Format("15:04")
			if asMachine {
				fmt.Fprintf(out, "On the other machine, within 5 minutes (until %s), run:\n\n  ccrelay login %s %s\n\n", until, ans.URL, ans.Code)
				return nil
			}
			link := pairLink(ans.URL, ans.Code, keyFingerprint(key.PublicKey().Bytes()))
			if !strings.HasPrefix(link, "https://") {
				fmt.Fprintf(cmd.ErrOrStderr(), "ccrelay: warning: the relay is not reached over HTTPS (%s): a phone cannot use it; see docs/deploy.md\n", ans.URL)
			}
			if err := printQR(out, link); err != nil {
				return err
			}
			fmt.Fprintf(out, "\nScan this with the phone's camera, or open:\n  %s\nThe code works once, until %s.\n", link, until)
			return nil
		},
	}
	addMachineFlags(cmd, &mf)
	cmd.Flags().BoolVar(&asMachine, "machine", false, "make a code for another machine (ccrelay login) instead of a phone")
	return cmd
}

// pairLink is the link a phone opens: the relay's address with the code
// and the machine key's fingerprint in the fragment.
func pairLink(base, code, fingerprint string) string {
	return strings.TrimSuffix(base, "/") + "/#pair=" + code + "." + fingerprint
}

// qrQuiet is the quiet zone around the printed QR code, in modules (the
// standard asks for 4).
const qrQuiet = 4

// printQR prints text as a QR code with half blocks, two modules a line,
// black on white whatever the terminal's colours.
func printQR(w io.Writer, text string) error {
	code, err := qr.Encode(text, qr.M)
	if err != nil {
		return fmt.Errorf("QR code: %w", err)
	}
	fmt.Fprint(w, qrText(code.Size, code.Black))
	return nil
}

// qrText renders a size×size module matrix (black reports a dark module)
// with its quiet zone.
func qrText(size int, black func(x, y int) bool) string {
	dark := func(x, y int) bool {
		x, y = x-qrQuiet, y-qrQuiet
		return x >= 0 && y >= 0 && x < size && y < size && black(x, y)
	}
	var b strings.Builder
	n := size + 2*qrQuiet
	for y := 0; y < n; y += 2 {
		b.WriteString("\x1b[30;47m")
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
		b.WriteString("\x1b[0m\n")
	}
	return b.String()
}
