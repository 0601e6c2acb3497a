//go:build ignore

// Writes the app's PNG icons into static/ (go generate ./web).
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/ccrelay/ccrelay/web/internal/iconart"
)

func main() {
	for _, ic := range iconart.Icons {
		if err := os.WriteFile(filepath.Join("static", ic.Name), iconart.PNG(ic), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
