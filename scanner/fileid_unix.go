//go:build unix

package scanner

import (
	"os"
	"syscall"
)

// fileID is the device and inode of the open file f.
func fileID(_ *os.File, fi os.FileInfo) FileID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}
	}
	return FileID{}
}
