package launcher

import "regexp"

// What reaches Claude's command line from outside (the app, the hook) is
// checked here first, and always passed as one argv item (--flag=value), so
// that no value can become a flag of its own.

// sessionIDPattern is Claude Code's session id: a UUID.
var sessionIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ValidSessionID reports whether id has the form of a Claude Code session
// id (a UUID).
func ValidSessionID(id string) bool { return sessionIDPattern.MatchString(id) }
