package launcher

import "errors"

// errLocked: another process holds the lock (lockFile without waiting).
var errLocked = errors.New("locked by another process")
