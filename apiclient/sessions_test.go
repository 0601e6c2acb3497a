package apiclient

// Session ids of the tests that talk to a relay: UUIDs, as Claude Code
// makes them (the relay refuses any other form).
const (
	sessA = "a0000000-0000-4000-8000-00000000000a"
	sessB = "b0000000-0000-4000-8000-00000000000b"
	sessK = "c0000000-0000-4000-8000-00000000000c"
	sessS = "d0000000-0000-4000-8000-00000000000d"
	sessF = "e0000000-0000-4000-8000-00000000000f"
	sessN = "e1000000-0000-4000-8000-00000000000e"
	sessT = "e2000000-0000-4000-8000-000000000001"
)
