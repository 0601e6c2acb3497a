package seal

import (
	"fmt"
	"testing"
)

// envelopeSizes are typical envelope bodies: a short text or tool call,
// a paragraph of the agent, a tool's output, a large file read.
var envelopeSizes = []int{256, 4 << 10, 64 << 10, 1 << 20}

func BenchmarkSeal(b *testing.B) {
	k := newKey(b)
	ad := AD{Session: testSession, ID: testEnvID, Direction: FromMachine}
	for _, n := range envelopeSizes {
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			pt := make([]byte, n)
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := k.Seal(ad, pt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	k := newKey(b)
	ad := AD{Session: testSession, ID: testEnvID, Direction: FromMachine}
	for _, n := range envelopeSizes {
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			s, err := k.Seal(ad, make([]byte, n))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := k.Open(ad, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWrap and BenchmarkUnwrap: one per session and device, when a
// session starts or a device is paired.
func BenchmarkWrap(b *testing.B) {
	machine, device := newKeyPair(b), newKeyPair(b)
	k := newKey(b)
	for b.Loop() {
		if _, err := WrapKey(machine, device.Public(), testSession, k); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnwrap(b *testing.B) {
	machine, device := newKeyPair(b), newKeyPair(b)
	w, _ := WrapKey(machine, device.Public(), testSession, newKey(b))
	for b.Loop() {
		if _, err := UnwrapKey(device, machine.Public(), testSession, w); err != nil {
			b.Fatal(err)
		}
	}
}
