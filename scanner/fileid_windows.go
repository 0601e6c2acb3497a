package scanner

import (
	"os"

	"golang.org/x/sys/windows"
)

// fileID is the volume serial number and file index of the open file f:
// Windows' own identity of a file, kept while it is renamed and new for a
// file made again under the same name. os.FileInfo does not carry it on
// Windows (os.SameFile asks for it the same way).
func fileID(f *os.File, _ os.FileInfo) FileID {
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &info); err != nil {
		return FileID{}
	}
	return FileID{Dev: uint64(info.VolumeSerialNumber), Ino: uint64(info.FileIndexHigh)<<32 | uint64(info.FileIndexLow)}
}
