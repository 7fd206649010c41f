package resume

import (
	"cmp"
	"slices"
	"time"
)

// The engine keeps every request's deadline (maxWait, Retention or
// DeliveredRetention, or its fixed ttl) with one timer of its own instead of one
// per request. A deadline is now plus one of the first three durations, so each
// of those kinds is queued in a FIFO that stays sorted; a ttl deadline (a time
// of its own per request) is inserted in order into its queue. The timer fires
// at the earliest head. A
// request re-armed, stopped or freed bumps its generation; the entries of older
// generations are stale: skipped when they come due, and swept out as soon as
// they outnumber the current ones (and 64). A stale entry still points to its
// request, so the sweep is also what lets a freed request's memory go before its
// old deadline would have come due (up to MaxWait later).

// clock names a request's deadline: which duration runs.
type clock uint8

const (
	clockMaxWait clock = iota
	clockRetention
	clockDelivered
	clockTTL // the request's own: created + StartOptions.TTL
	numClocks
)

// deadline is a queued request deadline, current while gen is the request's tgen.
type deadline struct {
	r   *Request
	gen uint64
	due time.Duration // since timers.epoch, on the monotonic clock
}

// timers is the engine's deadline queues. Its fields are guarded by Engine.tmu.
type timers struct {
	q     [numClocks][]deadline // each in ascending due
	epoch time.Time             // when the engine was made
	timer *time.Timer           // created on first use; fires Engine.fire
	at    time.Duration         // when timer is armed for (since epoch); 0 when it is not
	stale int                   // queued entries that are stale (counted as they become stale)
}

// minSweep is the number of stale entries the queues may hold however few the
// current ones are.
const minSweep = 64

// arm queues a deadline for r, whose tgen is gen, on clock c. Called with r.mu held.
func (e *Engine) arm(r *Request, gen uint64, c clock) {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	t := &e.tm
	now := time.Since(t.epoch) // read under tmu, so that each queue stays in order
	due := now + e.durations[c]
	if c == clockTTL {
		due = max(r.Created().Add(r.extra().ttl).Sub(t.epoch), now)
	}
	t.staleLocked(r) // the deadline this one replaces
	for k, q := range t.q {
		// The deadline this one replaces is often the newest of its queue (a
		// response written right after completion): drop it now, not when due.
		if n := len(q); n > 0 && q[n-1].r == r {
			q[n-1] = deadline{}
			t.q[k] = q[:n-1]
			t.stale--
		}
	}
	if c == clockTTL {
		q := t.q[c]
		i, _ := slices.BinarySearchFunc(q, due, func(d deadline, due time.Duration) int { return cmp.Compare(d.due, due+1) })
		t.q[c] = slices.Insert(q, i, deadline{r: r, gen: gen, due: due})
	} else {
		t.q[c] = push(t.q[c], deadline{r: r, gen: gen, due: due})
	}
	r.queued = true
	if t.at == 0 || due < t.at {
		t.at = due
		if t.timer == nil {
			t.timer = time.AfterFunc(due-now, e.fire)
		} else {
			t.timer.Reset(due - now)
		}
	}
}

// staleLocked notes that r's queued deadline, if it has one, is stale now (r's
// generation was just bumped), and sweeps when stale entries outnumber the rest.
func (t *timers) staleLocked(r *Request) {
	if !r.queued {
		return
	}
	r.queued = false
	t.stale++
	n := 0
	for _, q := range t.q {
		n += len(q)
	}
	if t.stale > max(n-t.stale, minSweep) {
		t.sweepLocked()
	}
}

// sweepLocked drops the stale entries.
func (t *timers) sweepLocked() {
	for c := range t.q {
		q := slices.DeleteFunc(t.q[c], func(d deadline) bool { return d.gen != d.r.tgen.Load() })
		if cap(q) > 64 && len(q) < cap(q)/4 {
			q = slices.Clone(q) // give most of a large array back
		}
		t.q[c] = q
	}
	t.stale = 0
}

// disarm notes that r's deadline was stopped: its queued entry is stale. Called
// with r.mu held, after r's generation was bumped.
func (e *Engine) disarm(r *Request) {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	e.tm.staleLocked(r)
}

// fire runs the deadlines that are due and re-arms the timer for the next one.
func (e *Engine) fire() {
	e.tmu.Lock()
	t := &e.tm
	now := time.Since(t.epoch)
	var due []deadline
	var next time.Duration // 0: none
	for c := range t.q {
		q := t.q[c]
		i := 0
		for ; i < len(q) && q[i].due <= now; i++ {
			if q[i].gen == q[i].r.tgen.Load() {
				due = append(due, q[i])
				q[i].r.queued = false
			} else {
				t.stale--
			}
			q[i] = deadline{}
		}
		if i == len(q) {
			q = q[:0] // reuse the array
		} else {
			q = q[i:]
		}
		t.q[c] = q
		if len(q) > 0 && (next == 0 || q[0].due < next) {
			next = q[0].due
		}
	}
	t.at = next
	if next != 0 {
		t.timer.Reset(next - now)
	}
	e.tmu.Unlock()
	for _, d := range due {
		d.r.onTimer(d.gen)
	}
}

// stopTimers drops every queued deadline and stops the engine's timer
// (Engine.Close). A request re-armed later arms it again.
func (e *Engine) stopTimers() {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	t := &e.tm
	if t.timer != nil {
		t.timer.Stop()
	}
	for _, q := range t.q {
		for _, d := range q {
			d.r.queued = false
		}
	}
	t.q = [numClocks][]deadline{}
	t.at, t.stale = 0, 0
}

// push appends v to the FIFO q, doubling its array when full: append grows a large
// slice by a quarter, which for a queue that only grows (results retained for a
// minute, under load) allocates five times its final size instead of twice.
func push[T any](q []T, v T) []T {
	if len(q) == cap(q) {
		q = append(make([]T, 0, 2*len(q)+16), q...)
	}
	return append(q, v)
}

// scheduleLocked sets the one deadline a request has, from its state and
// attachment: a detached processing request expires after MaxWait; an ended one is
// dropped after Retention (DeliveredRetention once its response was written); an
// attached processing request has none. A request with a ttl has that one
// deadline, whatever its state: polls and attachments do not move it.
func (r *Request) scheduleLocked() {
	var c clock
	switch {
	case r.gone.Load():
		return
	case r.extra().ttl > 0:
		if r.ttlArmed {
			return // its one deadline does not move
		}
		r.ttlArmed = true
		c = clockTTL
	case r.state == StateProcessing && r.att != nil:
		r.stopTimerLocked()
		return
	case r.state == StateProcessing:
		c = clockMaxWait
	case r.delivered:
		c = clockDelivered
	default:
		c = clockRetention
	}
	r.e.arm(r, r.tgen.Add(1), c) // the deadline queued before, if any, is now stale
}

func (r *Request) stopTimerLocked() {
	r.ttlArmed = false
	r.tgen.Add(1)
	r.e.disarm(r)
}

// onTimer runs when the deadline of generation gen comes due.
func (r *Request) onTimer(gen uint64) {
	r.mu.Lock()
	switch {
	case r.gone.Load() || r.tgen.Load() != gen: // freed, re-armed or stopped meanwhile
		r.mu.Unlock()
	case r.extra().ttl > 0 && r.state == StateProcessing: // its lifetime is over
		r.setStateLocked(StateExpired)
		r.mu.Unlock()
	case r.extra().ttl > 0:
		r.freeLocked(StateExpired)
		r.mu.Unlock()
	case r.state == StateProcessing && r.att != nil:
		r.mu.Unlock() // attached meanwhile
	case r.state == StateProcessing:
		r.setStateLocked(StateExpired)
		r.mu.Unlock()
	case r.att != nil && r.att.draining:
		// Retention ended while the response is being written to an attached
		// client: let the write finish (or fail) rather than lose it mid-way.
		r.scheduleLocked()
		r.mu.Unlock()
	default: // retention ended
		r.freeLocked(StateExpired)
		r.mu.Unlock()
	}
}
