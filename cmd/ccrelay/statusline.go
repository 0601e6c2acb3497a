package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/launcher"
)

// Bounds of the status line command: what it reads of Claude's input and
// of the user's status line, and how long the user's may run.
const (
	maxStatusInput   = 1 << 20
	maxStatusOutput  = 16 << 10
	userStatusTimout = 5 * time.Second
)

func newStatusLineCmd() *cobra.Command {
	var status, user string
	cmd := &cobra.Command{
		Use:    "statusline --status FILE --user FILE",
		Short:  "Claude Code's status line under ccrelay: the user's own, then the relay's state (used internally)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, _ := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxStatusInput))
			line := runUserStatusLine(cmd.Context(), user, in)
			seg := statusSegment(status)
			switch {
			case line == "":
				line = seg
			default:
				first, rest, _ := strings.Cut(line, "\n")
				line = first + "  " + seg
				if rest != "" {
					line += "\n" + rest
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			return nil // a status line never fails Claude
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "the file ccrelay keeps its state in")
	cmd.Flags().StringVar(&user, "user", "", "the file holding the user's own status line setting")
	return cmd
}

// runUserStatusLine runs the user's status line command, as Claude Code
// would (through the shell, Claude's input on stdin), and returns its
// output without the last newline; "" when there is none or it fails.
func runUserStatusLine(ctx context.Context, file string, in []byte) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	var sl struct {
		Type    string `json:"type"`
		Command string `json:"command"`
	}
	if json.Unmarshal(b, &sl) != nil || sl.Command == "" || (sl.Type != "" && sl.Type != "command") {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, userStatusTimout)
	defer cancel()
	c := exec.CommandContext(ctx, "/bin/sh", "-c", sl.Command)
	c.Stdin = bytes.NewReader(in)
	var out limitedBuffer
	out.max = maxStatusOutput
	c.Stdout = &out
	if c.Run() != nil && out.Len() == 0 {
		return ""
	}
	return strings.TrimRight(out.String(), "\n")
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// statusSegment is ccrelay's part of the status line, from its status file.
func statusSegment(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return "ccrelay: starting"
	}
	var st launcher.RelayStatus
	if json.Unmarshal(b, &st) != nil {
		return "ccrelay: starting"
	}
	seg := "ccrelay: relayed"
	switch {
	case st.Refused:
		seg = "ccrelay: the relay refused the token (kept on disk)"
	case !st.Connected:
		seg = fmt.Sprintf("ccrelay: relay unreachable, %s kept", size(st.Unsent))
	case st.Unsent > 0:
		seg = fmt.Sprintf("ccrelay: sending %s", size(st.Unsent))
	}
	if st.Polled {
		seg += ", transcripts polled (inotify limit reached; see ccrelay.log)"
	}
	return seg
}
