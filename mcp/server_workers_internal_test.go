package mcp

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// After a burst of calls, at most maxIdle workers stay idle, and they leave
// once idle for workerIdle.
func TestWorkersIdleBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers()
		defer w.stop()
		const burst = 1000
		release := make(chan struct{})
		var started sync.WaitGroup
		started.Add(burst)
		for range burst {
			w.run(func() { started.Done(); <-release })
		}
		started.Wait()
		close(release)
		synctest.Wait()
		if n := w.idle.Load(); n != maxIdle {
			t.Fatalf("%d workers idle after a burst of %d, want %d", n, burst, maxIdle)
		}
		done := make(chan struct{})
		w.run(func() { close(done) }) // an idle worker takes it
		<-done
		synctest.Wait()
		if n := w.idle.Load(); n != maxIdle {
			t.Fatalf("%d workers idle after one more call, want %d", n, maxIdle)
		}
		time.Sleep(workerIdle)
		synctest.Wait()
		if n := w.idle.Load(); n != 0 {
			t.Fatalf("%d workers idle after %v, want 0", n, workerIdle)
		}
	})
}
