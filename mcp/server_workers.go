package mcp

import (
	"sync"
	"sync/atomic"
	"time"
)

// workers runs calls on goroutines that are kept for a while after their call,
// instead of a new goroutine per call: a call runs deep (mcp-go's dispatch, JSON
// decoding, the tool), and a fresh goroutine grows its stack by copying, several
// times, for every call (a good share of a quick call's CPU time).
// A worker idle for workerIdle exits, and so does one that finds maxIdle
// others idle already: a burst of calls leaves no more than that holding
// their grown stacks (up to 16 KB each: thousands of them at the end of a
// burst of 100,000 calls whose clients left). stop ends them all.
type workers struct {
	work chan func() // unbuffered: a send succeeds only when a worker waits
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	idle atomic.Int32 // workers waiting for a call
}

const (
	workerIdle = 10 * time.Second
	maxIdle    = 128
)

func newWorkers() *workers { return &workers{work: make(chan func()), quit: make(chan struct{})} }

// run runs f on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	select {
	case w.work <- f:
	default:
		w.wg.Add(1)
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	defer w.wg.Done()
	f() // before the idle timer is made: a worker on a long call holds none
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		if w.idle.Add(1) > maxIdle {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.work:
			w.idle.Add(-1)
			f()
			idle.Reset(workerIdle)
		case <-idle.C:
			w.idle.Add(-1)
			return
		case <-w.quit:
			w.idle.Add(-1)
			return
		}
	}
}

// stop ends the idle workers and waits for every worker to finish its call.
func (w *workers) stop() {
	w.once.Do(func() { close(w.quit) })
	w.wg.Wait()
}
