package mcp

import (
	"container/list"
	"context"
	"strconv"
	"sync"
	"time"

	tokenbucket "github.com/mcp-resume/mcp-resume/internal/bucket"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Rates keeps the token buckets of Policy.Rate: one per tool and principal.
// The server's default keeps them in memory; a cluster's instances share one
// (resume/cluster's), so that a principal gets a tool's rate once in all, not
// once per instance.
type Rates interface {
	// Take spends one call of the bucket named by tool and principal, under
	// rate. When none is left, it reports how long until one is.
	Take(ctx context.Context, tool, principal string, rate Rate) (ok bool, wait time.Duration, err error)
}

// memoryRates is the Rates of a server on its own.
type memoryRates struct {
	mu      sync.Mutex
	buckets map[rateKey]*rateEntry
	// next is the number of buckets at which a new one first drops the
	// full ones: twice those a sweep left, sweepAt at least, so that many
	// principals calling at once cost one sweep per doubling, not one per
	// new principal.
	next   int
	sweeps int // for tests
}

type rateKey struct{ tool, principal string }

type rateEntry struct {
	tokenbucket.Bucket
	rate Rate
}

// every is how long one of rate's calls takes to come back.
func (r Rate) every() time.Duration { return r.Per / time.Duration(r.Calls) }

// sweepAt is the least number of buckets past which a Take first drops the
// full ones (as good as none): the buckets of principals that stopped calling
// do not pile up.
const sweepAt = 4096

// NewMemoryRates returns Rates that keep the buckets in memory.
func NewMemoryRates() Rates {
	return &memoryRates{buckets: make(map[rateKey]*rateEntry), next: sweepAt}
}

func (m *memoryRates) Take(_ context.Context, tool, principal string, rate Rate) (bool, time.Duration, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := rateKey{tool, principal}
	e := m.buckets[k]
	if e == nil {
		if len(m.buckets) >= m.next {
			for k, e := range m.buckets {
				if e.Full(now, float64(e.rate.Calls), e.rate.every()) {
					delete(m.buckets, k)
				}
			}
			m.next = max(sweepAt, 2*len(m.buckets))
			m.sweeps++
		}
		e = &rateEntry{}
		m.buckets[k] = e
	}
	e.rate = rate
	ok, wait := e.Take(now, float64(rate.Calls), rate.every())
	return ok, wait, nil
}

// Limits bounds the calls of each tool that run at once (Policy.Concurrency),
// with a queue in order of arrival for the calls past a bound. It is safe for
// concurrent use, and may be shared by servers (Options.Limits).
type Limits struct {
	mu     sync.Mutex
	tools  map[string]*toolSlots // a tool's, while it has calls running or waiting (and after: forgetLocked)
	queued int                   // calls waiting, of all tools
}

type toolSlots struct {
	running int
	by      map[string]int // running, by principal
	waiting list.List      // of *slotWaiter, in order of arrival
}

type slotWaiter struct {
	principal string
	c         Concurrency
	ready     chan struct{} // closed when it has its place
}

// fits reports whether a call of principal may run now under c.
func (t *toolSlots) fits(principal string, c Concurrency) bool {
	return (c.Max <= 0 || t.running < c.Max) && (c.PerPrincipal <= 0 || t.by[principal] < c.PerPrincipal)
}

func (t *toolSlots) take(principal string) {
	t.running++
	t.by[principal]++
}

// enter gives a call of tool by principal its place under c, waiting for one
// in order of arrival up to c.Wait when c.Queue allows, until ctx ends. It
// returns the function that gives the place back, or the refusal.
func (s *Limits) enter(ctx context.Context, tool, principal string, c Concurrency) (func(), *spec.Error) {
	s.mu.Lock()
	t := s.tools[tool]
	if t == nil {
		t = &toolSlots{by: make(map[string]int)}
		s.tools[tool] = t
	}
	// The waiters do not fit (leave gives every place freed to the first that
	// fits): a call that fits takes no place from any of them.
	if t.fits(principal, c) {
		t.take(principal)
		s.mu.Unlock()
		return func() { s.leave(tool, principal) }, nil
	}
	if t.waiting.Len() >= c.Queue {
		s.mu.Unlock()
		return nil, concurrencyLimit(c)
	}
	w := &slotWaiter{principal: principal, c: c, ready: make(chan struct{})}
	e := t.waiting.PushBack(w)
	s.queued++
	s.mu.Unlock()

	timer := time.NewTimer(c.Wait)
	defer timer.Stop()
	var refusal *spec.Error
	select {
	case <-w.ready:
		return func() { s.leave(tool, principal) }, nil
	case <-timer.C:
		refusal = concurrencyLimit(c)
	case <-ctx.Done():
		refusal = spec.NewError(spec.CodeInternalError, spec.ReasonCancelled, "cancelled while waiting for a place")
	}
	s.mu.Lock()
	select {
	case <-w.ready: // given a place as it gave up: the place goes on
		s.mu.Unlock()
		s.leave(tool, principal)
		return nil, refusal
	default:
	}
	t.waiting.Remove(e)
	s.queued--
	s.forgetLocked(tool, t)
	s.mu.Unlock()
	return nil, refusal
}

// leave gives back a place of tool's that principal held, to the first
// waiters that fit.
func (s *Limits) leave(tool, principal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tools[tool]
	t.running--
	if t.by[principal]--; t.by[principal] <= 0 {
		delete(t.by, principal)
	}
	for e := t.waiting.Front(); e != nil; {
		next := e.Next()
		if w := e.Value.(*slotWaiter); t.fits(w.principal, w.c) {
			t.take(w.principal)
			t.waiting.Remove(e)
			s.queued--
			close(w.ready)
		}
		e = next
	}
	s.forgetLocked(tool, t)
}

// keepIdle is how many tools' slots are kept while none of their calls runs
// or waits, so that a call of a tool whose calls come one at a time finds
// its tool's slots (and their map) made.
const keepIdle = 256

// forgetLocked drops t, tool's, when nothing runs or waits and more than
// keepIdle tools have slots (a server has only so many tools).
func (s *Limits) forgetLocked(tool string, t *toolSlots) {
	if t.running == 0 && t.waiting.Len() == 0 && len(s.tools) > keepIdle {
		delete(s.tools, tool)
	}
}

// concurrencyLimit is the refusal of a call past c: try again in c.Wait (at
// least a second).
func concurrencyLimit(c Concurrency) *spec.Error {
	msg := "this tool runs as many calls as it may at once"
	if c.Queue > 0 {
		msg += ", and none ended within " + c.Wait.String()
	}
	return spec.RateLimited(spec.ReasonConcurrencyLimit, msg+"; try again later", max(c.Wait, time.Second))
}

// rateLimited is the refusal of a call past rate, allowed again after wait.
func rateLimited(rate Rate, wait time.Duration) *spec.Error {
	return spec.RateLimited(spec.ReasonRateLimited,
		"this tool's rate for you is spent ("+strconv.Itoa(rate.Calls)+" calls per "+rate.Per.String()+"); try again later", wait)
}

// NewLimits returns Limits with no call running.
func NewLimits() *Limits { return &Limits{tools: make(map[string]*toolSlots)} }

// Queued is the number of calls waiting for a place, of all tools.
func (s *Limits) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

// Queued is the number of calls waiting for a place (Policy.Concurrency),
// of all tools (of every server that shares its Limits).
func (s *Server) Queued() int { return s.slots.Queued() }

// limitName is the name tool's rate and places go by (Options.LimitName).
func (s *Server) limitName(tool string) string {
	if f := s.opts.LimitName; f != nil {
		return f(tool)
	}
	return tool
}

// admit applies cl's policy's rate and concurrency to it as its tool is
// about to start, waiting for a place until ctx (the one its tool would run
// on) ends: it returns the function that gives its place back when its tool
// has returned, or the refusal that answers it instead.
func (s *Server) admit(cl *call, ctx context.Context) (func(), *spec.Error) {
	p, principal := cl.pol, cl.c.principal
	if p.Rate.Calls > 0 {
		ok, wait, err := s.rates.Take(ctx, s.limitName(cl.tool), principal, p.Rate)
		switch {
		case err != nil:
			// The bucket is out of reach (a cluster's store): the call runs
			// rather than every call of the tool failing with the store.
			cl.c.logger().Warn().Err(err).Str("tool", cl.tool).Msg("a tool's rate could not be read; the call runs")
		case !ok:
			s.refused(cl, spec.ReasonRateLimited)
			return nil, rateLimited(p.Rate, wait)
		}
	}
	if !p.Concurrency.bounded() {
		return func() {}, nil
	}
	leave, refusal := s.slots.enter(ctx, s.limitName(cl.tool), principal, p.Concurrency)
	if refusal != nil && refusal.Reason == spec.ReasonConcurrencyLimit {
		s.refused(cl, spec.ReasonConcurrencyLimit)
	}
	return leave, refusal
}

// refused tells Options.OnRefused and the audit trail of a call its tool's
// limits refused for reason.
func (s *Server) refused(cl *call, reason spec.Reason) {
	cl.span.markRefused()
	s.tellRefused(cl, reason)
}

// tellRefused tells the debug log of a request refused for reason, and
// Options.OnRefused of a refused tools/call: its tool, or "" for a name the
// server has no tool of (a metric's label, which a client must not multiply).
func (s *Server) tellRefused(cl *call, reason spec.Reason) {
	cl.c.debug().Str("request", string(cl.id)).Str("tool", cl.tool).Str("reason", string(reason)).Msg("request refused")
	f := s.opts.OnRefused
	if f == nil || cl.tool == "" { // not a tools/call
		return
	}
	tool := cl.tool
	if s.srv.GetTool(tool) == nil {
		tool = ""
	}
	f(tool, cl.c.principal != "", reason)
}
