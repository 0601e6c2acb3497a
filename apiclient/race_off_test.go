//go:build !race

package apiclient

const raceEnabled = false
