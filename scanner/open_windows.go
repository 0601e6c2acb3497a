package scanner

import "os"

// openFlags: Windows has no named pipes in the file system to wait on.
const openFlags = os.O_RDONLY
