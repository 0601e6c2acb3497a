package main

import "os"

// askToStop ends a ccrelay: Windows has no SIGTERM to send another
// process, so it is killed (its Claude, in its Job Object, with it); its
// outbox keeps what was not sent, for the next ccrelay in the folder.
func askToStop(p *os.Process) error { return p.Kill() }
