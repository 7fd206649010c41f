// Package warngate lets a repeated warning through at most once per interval,
// counting the ones it holds back, so that a condition met on every event (a
// bound reached, a sink that fails) does not flood a log.
package warngate

import (
	"sync/atomic"
	"time"
)

// Gate is one warning's turn. Its zero value lets the first warning through.
type Gate struct {
	last atomic.Int64 // unix nanoseconds of the last warning let through; 0 for none yet
	held atomic.Int64 // warnings held back since
}

// Due reports whether a warning may go at now, and takes the turn if so; held
// is how many were held back since the last one let through.
func (g *Gate) Due(now time.Time, every time.Duration) (ok bool, held int64) {
	at := now.UnixNano()
	last := g.last.Load()
	if (last != 0 && at-last < int64(every)) || !g.last.CompareAndSwap(last, at) {
		g.held.Add(1)
		return false, 0
	}
	return true, g.held.Swap(0)
}
