// Package invariant says how thoroughly a guarded state checks itself after
// each change: the checks that visit every entry of a state run in test
// binaries only, and not in a run of benchmarks, whose figures are the
// code's own.
package invariant

import (
	"flag"
	"sync"
	"testing"
)

// Thorough reports whether a state's checks that visit every entry run: in a
// test binary that runs no benchmark.
var Thorough = sync.OnceValue(func() bool {
	if !testing.Testing() {
		return false
	}
	bench := flag.Lookup("test.bench")
	return bench == nil || bench.Value.String() == ""
})
