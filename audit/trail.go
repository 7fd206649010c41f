package audit

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/warngate"
)

// A Sink writes events, one at a time: a Trail calls Write from its one
// goroutine, never concurrently, and Write may block (a slow disk, a
// collector). A Sink that is also an io.Closer is closed by Trail.Close,
// after its last Write.
type Sink interface {
	Write(Event) error
}

// A BatchSink is a Sink that writes several events at once: a Trail gives it
// the events that gathered since its last write in one WriteBatch (File and
// JSONLines: one write of as many complete lines), in place of a Write each.
// The slice is the Trail's again once WriteBatch returns.
type BatchSink interface {
	WriteBatch([]Event) error
}

// Options configure a Trail. Nil means defaults.
type Options struct {
	// Buffer is how many events wait for the sinks at most, counting those
	// being written; past it an event is dropped (Dropped counts it). 0 means
	// DefaultBuffer.
	Buffer int
	// Linger is how long an event waits for others before the trail writes
	// it, with them (so that a busy server's trail makes a write per Linger,
	// not per call); the trail writes sooner when half its Buffer is taken,
	// and at Close. It bounds how late a line reaches a file, and so what
	// is lost with a process that dies: the events of its last Linger. 0
	// means DefaultLinger; negative: no waiting (a write whenever the
	// writer is idle).
	Linger time.Duration
	// Warn, when set, is told of events dropped and of the sinks' errors, at
	// most once per WarnEvery for each.
	Warn func(error)
	// WarnEvery bounds how often Warn is told: 0 means DefaultWarnEvery.
	WarnEvery time.Duration
}

// DefaultBuffer, DefaultLinger and DefaultWarnEvery are the defaults of
// Options.Buffer, Options.Linger and Options.WarnEvery.
const (
	DefaultBuffer    = 4096
	DefaultLinger    = 100 * time.Millisecond
	DefaultWarnEvery = time.Minute
)

// ErrDropped is what Options.Warn is told when events were dropped.
var ErrDropped = errors.New("audit: events dropped: the sinks are behind")

// Trail hands events to its sinks from a goroutine of its own, so that
// recording one never blocks the call it tells of: its buffer is bounded, and
// full, it drops the event and counts it (the policy is "drop with a
// counter"). Its goroutine sleeps while nothing is queued, and otherwise
// writes what gathered once per Options.Linger, in one batch. Its methods
// are safe for concurrent use.
type Trail struct {
	sinks  []Sink
	warn   func(error)
	every  time.Duration
	linger time.Duration
	max    int // Options.Buffer

	mu sync.Mutex // guards queue, inHand and closed
	// queue holds the events recorded since the writer last took them;
	// inHand is how many it took and is writing. Together at most max.
	queue  []Event
	inHand int
	closed bool

	// kick wakes the writer: the first event queued, the queue half full,
	// Close. One kick waiting is enough (the writer reads the state under mu).
	kick chan struct{}
	done chan struct{} // closed when the writer has returned
	err  error         // the sinks' Close errors; set before done closes

	dropped  atomic.Uint64
	dropWarn warngate.Gate
	errWarn  warngate.Gate
}

// NewTrail starts a trail writing to sinks; Close ends it.
func NewTrail(opts *Options, sinks ...Sink) *Trail {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.WarnEvery <= 0 {
		o.WarnEvery = DefaultWarnEvery
	}
	t := &Trail{
		sinks: sinks, warn: o.Warn, every: o.WarnEvery, linger: o.Linger, max: o.Buffer,
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	go t.loop()
	return t
}

// Record queues e for the sinks, or drops it (counted) when the buffer is
// full or the trail closed. It never blocks: it wakes the writer only for
// the first event queued and when half the buffer is taken.
func (t *Trail) Record(e Event) {
	t.mu.Lock()
	if t.closed || len(t.queue)+t.inHand >= t.max {
		t.mu.Unlock()
		t.drop()
		return
	}
	t.queue = append(t.queue, e)
	n := len(t.queue) + t.inHand
	t.mu.Unlock()
	if n == 1 || n == (t.max+1)/2 {
		t.wake()
	}
}

func (t *Trail) wake() {
	select {
	case t.kick <- struct{}{}:
	default: // a kick is waiting already
	}
}

func (t *Trail) drop() {
	n := t.dropped.Add(1)
	if t.warn == nil {
		return
	}
	if ok, _ := t.dropWarn.Due(time.Now(), t.every); ok {
		t.warn(fmt.Errorf("%w (%d in all)", ErrDropped, n))
	}
}

// Dropped returns how many events were dropped since the trail started
// (the metric mcp_resume_audit_dropped_total).
func (t *Trail) Dropped() uint64 { return t.dropped.Load() }

// loop is the writer: woken by a first event, it lets others gather for
// Linger (less when the queue fills to half, or the trail closes), then
// takes them all and writes them.
func (t *Trail) loop() {
	defer close(t.done)
	var timer *time.Timer
	if t.linger > 0 {
		timer = time.NewTimer(t.linger)
		timer.Stop()
	}
	var batch []Event
	for {
		<-t.kick
		queued, closed := t.state()
		if queued == 0 && !closed {
			continue // a kick left from a batch written already
		}
		if timer != nil && !closed && 2*queued < t.max {
			timer.Reset(t.linger)
			select {
			case <-timer.C:
			case <-t.kick: // half full, or closing
				timer.Stop()
			}
		}
		t.mu.Lock()
		batch, t.queue = t.queue, batch[:0]
		t.inHand = len(batch)
		closed = t.closed
		t.mu.Unlock()
		if len(batch) > 0 {
			t.write(batch)
			clear(batch) // the events' strings are the garbage collector's
		}
		t.mu.Lock()
		t.inHand = 0
		more := len(t.queue) > 0
		t.mu.Unlock()
		if closed {
			t.err = t.closeSinks()
			return
		}
		if more {
			t.wake() // recorded during the write, which their Record did not wake
		}
	}
}

// state returns how many events are queued, and whether the trail is closed.
func (t *Trail) state() (queued int, closed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queue), t.closed
}

// write hands batch to each sink; an error is told to Warn (the first of a
// Sink's Writes that failed).
func (t *Trail) write(batch []Event) {
	for _, s := range t.sinks {
		var err error
		if bs, ok := s.(BatchSink); ok {
			err = bs.WriteBatch(batch)
		} else {
			for _, e := range batch {
				if werr := s.Write(e); werr != nil && err == nil {
					err = werr
				}
			}
		}
		if err != nil && t.warn != nil {
			if ok, _ := t.errWarn.Due(time.Now(), t.every); ok {
				t.warn(fmt.Errorf("audit: writing events: %w", err))
			}
		}
	}
}

func (t *Trail) closeSinks() error {
	var errs []error
	for _, s := range t.sinks {
		if c, ok := s.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Close writes the events buffered, closes the sinks that are io.Closers and
// returns their errors. An event recorded from then on is dropped.
func (t *Trail) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wake()
	<-t.done
	return t.err
}
