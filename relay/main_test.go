package relay

import (
	"os"
	"testing"

	"github.com/ccrelay/ccrelay/internal/fuzzmin"
)

// The engine's minimizing of what the fuzz targets find is bounded
// (internal/fuzzmin): -fuzz runs on instead of minimizing for minutes.
func TestMain(m *testing.M) { os.Exit(fuzzmin.Main(m)) }

func TestFuzzMinimizeTime(t *testing.T) { fuzzmin.Check(t) }
