package poll

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestUntilReturnsOnceTrue(t *testing.T) {
	n := 0
	Until(t, time.Minute, "the third check", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

// fatalTB records Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

type fatal struct{}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(fatal{})
}

func TestUntilFailsAtTheDeadline(t *testing.T) {
	f := &fatalTB{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != nil && r != (fatal{}) {
				panic(r)
			}
		}()
		Until(f, 20*time.Millisecond, "nothing", func() bool { return false })
	}()
	if !strings.Contains(f.msg, "waiting for nothing") {
		t.Fatalf("Fatalf got %q, want it to name what it waited for", f.msg)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", took)
	}
}
