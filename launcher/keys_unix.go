//go:build unix

package launcher

import (
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// readKeys hands what is typed on the terminal f to fn until fn returns
// false, ctx ends, or the terminal goes away. It waits with poll, keyPoll
// at a time, and reads only what poll says is there.
func readKeys(ctx context.Context, f *os.File, fn func([]byte) bool) {
	fd := int(f.Fd())
	buf := make([]byte, 64)
	for ctx.Err() == nil {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, keyPoll)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n == 0 || fds[0].Revents == 0 {
			continue
		}
		if fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 && fds[0].Revents&unix.POLLIN == 0 {
			return
		}
		k, err := unix.Read(fd, buf)
		if k <= 0 || err != nil {
			return
		}
		if !fn(buf[:k]) {
			return
		}
	}
}
