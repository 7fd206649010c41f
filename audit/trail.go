package audit

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// A Sink writes events, one at a time: a Trail calls Write from its one
// goroutine, never concurrently, and Write may block (a slow disk, a
// collector). A Sink that is also an io.Closer is closed by Trail.Close,
// after its last Write.
type Sink interface {
	Write(Event) error
}

// Options configure a Trail. Nil means defaults.
type Options struct {
	// Buffer is how many events wait for the sinks at most; past it an event
	// is dropped (Dropped counts it). 0 means DefaultBuffer.
	Buffer int
	// Warn, when set, is told of events dropped and of the sinks' errors, at
	// most once per WarnEvery for each.
	Warn func(error)
	// WarnEvery bounds how often Warn is told: 0 means DefaultWarnEvery.
	WarnEvery time.Duration
}

// DefaultBuffer and DefaultWarnEvery are the defaults of Options.Buffer and
// Options.WarnEvery.
const (
	DefaultBuffer    = 4096
	DefaultWarnEvery = time.Minute
)

// ErrDropped is what Options.Warn is told when events were dropped.
var ErrDropped = errors.New("audit: events dropped: the sinks are behind")

// Trail hands events to its sinks from a goroutine of its own, so that
// recording one never blocks the call it tells of: its buffer is bounded, and
// full, it drops the event and counts it (the policy is "drop with a
// counter"). Its methods are safe for concurrent use.
type Trail struct {
	ch    chan Event
	sinks []Sink
	warn  func(error)
	every time.Duration

	dropped  atomic.Uint64
	dropWarn warnGate
	errWarn  warnGate

	closed atomic.Bool
	stop   chan struct{} // closed by Close: the goroutine writes what is buffered and returns
	done   chan struct{} // closed when the goroutine has returned
	once   sync.Once
	err    error // the sinks' Close errors; set before done closes
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
	if o.WarnEvery <= 0 {
		o.WarnEvery = DefaultWarnEvery
	}
	t := &Trail{
		ch: make(chan Event, o.Buffer), sinks: sinks, warn: o.Warn, every: o.WarnEvery,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go t.loop()
	return t
}

// Record queues e for the sinks, or drops it (counted) when the buffer is
// full or the trail closed. It never blocks.
func (t *Trail) Record(e Event) {
	if t.closed.Load() {
		t.drop()
		return
	}
	select {
	case t.ch <- e:
	default:
		t.drop()
	}
}

func (t *Trail) drop() {
	n := t.dropped.Add(1)
	if t.warn != nil && t.dropWarn.due(t.every) {
		t.warn(fmt.Errorf("%w (%d in all)", ErrDropped, n))
	}
}

// Dropped returns how many events were dropped since the trail started
// (the metric mcp_resume_audit_dropped_total).
func (t *Trail) Dropped() uint64 { return t.dropped.Load() }

func (t *Trail) loop() {
	defer close(t.done)
	for {
		select {
		case e := <-t.ch:
			t.write(e)
		case <-t.stop:
			for {
				select {
				case e := <-t.ch:
					t.write(e)
				default:
					t.err = t.closeSinks()
					return
				}
			}
		}
	}
}

func (t *Trail) write(e Event) {
	for _, s := range t.sinks {
		if err := s.Write(e); err != nil && t.warn != nil && t.errWarn.due(t.every) {
			t.warn(fmt.Errorf("audit: writing an event: %w", err))
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
	t.once.Do(func() {
		t.closed.Store(true)
		close(t.stop)
	})
	<-t.done
	return t.err
}

// warnGate lets a warning through at most once per interval.
type warnGate struct {
	last atomic.Int64 // unix nanoseconds of the last warning let through
}

// due reports whether a warning may go now, and, if so, takes the turn.
func (g *warnGate) due(every time.Duration) bool {
	now := time.Now().UnixNano()
	last := g.last.Load()
	if last != 0 && now-last < int64(every) {
		return false
	}
	return g.last.CompareAndSwap(last, now)
}
