package resume_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Without acks, delivered notifications are dropped and the response is kept; a new
// sink gets what is kept.
func TestDeliveryNonAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, nil)
		r, _ := start(t, e, `1`, nil)
		a := newSink()
		attach(t, r, a, 0)

		n1 := appendMsg(t, r, resume.KindNotification, "")
		p2 := appendMsg(t, r, resume.KindProgress, `"p"`)
		wantSeqs(t, "sink A, written by Append", a.seqs(t), 1, 2)
		if n1 != 1 || p2 != 2 {
			t.Fatalf("Append returned seqs %d, %d; want 1, 2", n1, p2)
		}
		if st := r.Status(); st.HasPending || st.QueuedBytes != 0 {
			t.Fatalf("Status after delivered notifications = %+v, want nothing pending", st)
		}
		done := complete(t, r)
		wantSeqs(t, "sink A", a.seqs(t), 1, 2, 3)
		if done != 3 {
			t.Fatalf("Complete returned seq %d, want 3", done)
		}
		if got := a.received(t); got[0].kind != "notification" || got[1].kind != "progress" || got[1].key != `"p"` || got[2].kind != "response" {
			t.Fatalf("sink A got %+v", got)
		}
		if st := r.Status(); !st.HasPending || st.State != resume.StateCompleted {
			t.Fatalf("Status after delivered response = %+v, want completed, pending", st)
		}

		b := newSink()
		attach(t, r, b, 0)
		wantSeqs(t, "sink B replay", b.seqs(t), 3)
		wantSeqs(t, "sink A after takeover", a.seqs(t), 1, 2, 3)
	})
}

func TestDetachOtherSink(t *testing.T) {
	e, _ := newEngine(t, nil)
	r, _ := start(t, e, `1`, nil)
	a, b := newSink(), newSink()
	attach(t, r, a, 0)
	r.Detach(b) // not the current sink
	if !r.Attached(a) || r.Attached(b) {
		t.Fatal("Detach of another sink changed the attachment")
	}
	appendMsg(t, r, resume.KindNotification, "")
	wantSeqs(t, "sink A", a.seqs(t), 1)
	r.Detach(a)
	if r.Attached(a) {
		t.Fatal("still attached after Detach")
	}
	appendMsg(t, r, resume.KindNotification, "")
	wantSeqs(t, "sink A after Detach", a.seqs(t), 1)
}

func TestTakeover(t *testing.T) {
	e, _ := newEngine(t, nil)
	r, _ := start(t, e, `1`, nil)
	a, b := newSink(), newSink()
	attach(t, r, a, 0)
	appendMsg(t, r, resume.KindNotification, "")
	attach(t, r, b, 0)
	if r.Attached(a) || !r.Attached(b) {
		t.Fatal("Attach(B) did not take over from A")
	}
	appendMsg(t, r, resume.KindProgress, "p")
	r.Detach(a) // the old sink's connection closes: B stays attached
	if !r.Attached(b) {
		t.Fatal("Detach of the old sink detached the new one")
	}
	appendMsg(t, r, resume.KindRequest, "")
	complete(t, r)
	wantSeqs(t, "sink A", a.seqs(t), 1)
	wantSeqs(t, "sink B", b.seqs(t), 2, 3, 4)
	// Nothing comes after the final response: the request lets its sink go.
	if r.Attached(b) {
		t.Fatal("still attached after the final response was written")
	}
}

func TestAckReplay(t *testing.T) {
	e, _ := newEngine(t, nil)
	r, _ := start(t, e, `1`, &resume.StartOptions{AckMode: true})
	for range 5 {
		appendMsg(t, r, resume.KindNotification, "")
	}
	a := newSink()
	attach(t, r, a, 3)
	wantSeqs(t, "Attach(ack=3)", a.seqs(t), 4, 5)
	// In ack mode nothing is dropped on write.
	if st := r.Status(); !st.HasPending {
		t.Fatalf("Status = %+v, want written but unacknowledged messages pending", st)
	}
	b := newSink()
	attach(t, r, b, 4)
	wantSeqs(t, "Attach(ack=4)", b.seqs(t), 5)
	if err := r.Touch(5); err != nil {
		t.Fatalf("Touch(5): %v", err)
	}
	if st := r.Status(); st.HasPending || st.QueuedBytes != 0 {
		t.Fatalf("Status after acking everything = %+v, want nothing pending", st)
	}
	c := newSink()
	attach(t, r, c, 5)
	if got := c.seqs(t); len(got) != 0 {
		t.Fatalf("Attach(ack=5) wrote %v", got)
	}
}

// A client's first ack switches a request to ack mode.
func TestFirstAckSwitchesMode(t *testing.T) {
	e, _ := newEngine(t, nil)
	r, _ := start(t, e, `1`, nil)
	a := newSink()
	attach(t, r, a, 0)
	appendMsg(t, r, resume.KindNotification, "")
	if r.Status().HasPending {
		t.Fatal("non-ack mode kept a delivered notification")
	}
	if err := r.Touch(1); err != nil {
		t.Fatalf("Touch(1): %v", err)
	}
	appendMsg(t, r, resume.KindNotification, "")
	if !r.Status().HasPending {
		t.Fatal("ack mode dropped a delivered, unacknowledged notification")
	}
	b := newSink()
	attach(t, r, b, 1)
	wantSeqs(t, "sink B", b.seqs(t), 2)
}

// Over several dropped connections, a client that resumes with the highest seq it
// received gets every message exactly once, in order.
func TestAckExactlyOnceAcrossDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			n     = 60
			drops = 5
		)
		e, _ := newEngine(t, &resume.Options{MaxWait: time.Minute})
		r, tok := start(t, e, `1`, &resume.StartOptions{AckMode: true})

		var got []uint64 // what the client received, in order, over all connections
		var sinks []*testSink
		cur := failingSink(4)
		attach(t, r, cur, 0)
		sinks = append(sinks, cur)
		detachedFor := 0
		kinds := []resume.Kind{resume.KindNotification, resume.KindProgress, resume.KindNotification, resume.KindRequest}
		for i := range n {
			k := kinds[i%len(kinds)]
			appendMsg(t, r, k, fmt.Sprintf("p%d", i))
			if r.Attached(cur) {
				continue
			}
			// Disconnected: a few messages queue, then the client resumes on a new
			// connection with the highest seq it received.
			if detachedFor++; detachedFor < 3 {
				continue
			}
			detachedFor = 0
			got = append(got, cur.seqs(t)...)
			if len(sinks) < drops {
				cur = failingSink(3 + 2*len(sinks))
			} else {
				cur = newSink()
			}
			sinks = append(sinks, cur)
			ack := uint64(0)
			if len(got) > 0 {
				ack = got[len(got)-1]
			}
			resumed, err := e.Lookup(tok, []byte(`1`))
			if err != nil || resumed != r {
				t.Fatalf("Lookup on resume: %p, %v", resumed, err)
			}
			attach(t, r, cur, ack)
		}
		final := complete(t, r)
		got = append(got, cur.seqs(t)...)

		failures := 0
		for _, s := range sinks {
			if s.failures() > 0 {
				failures++
			}
		}
		if failures != drops {
			t.Fatalf("%d connections dropped, want %d", failures, drops)
		}
		want := make([]uint64, final)
		for i := range want {
			want[i] = uint64(i + 1)
		}
		wantSeqs(t, "received over all connections", got, want...)

		// Acking the final response frees the request.
		if err := r.Touch(final); err != nil {
			t.Fatalf("Touch(final): %v", err)
		}
		if n := e.Live(); n != 0 {
			t.Fatalf("Live() = %d after the final ack, want 0", n)
		}
		_, err := e.Lookup(tok, []byte(`1`))
		wantErr(t, "Lookup after the final ack", err, resume.ErrAcknowledged)
	})
}

// Acking the final response with Attach frees the request too, and says so: there
// is nothing to attach, and the client holds the result.
func TestAckFinalOnAttach(t *testing.T) {
	e, _ := newEngine(t, nil)
	r, tok := start(t, e, `1`, nil)
	appendMsg(t, r, resume.KindNotification, "")
	final := complete(t, r)
	s := newSink()
	wantErr(t, "Attach(ack=final)", r.Attach(s, final), resume.ErrAcknowledged)
	if n := e.Live(); n != 0 {
		t.Fatalf("Live() = %d after Attach acked the response, want 0", n)
	}
	if got := s.seqs(t); len(got) != 0 {
		t.Fatalf("Attach(ack=final) wrote %v", got)
	}
	_, err := e.Lookup(tok, []byte(`1`))
	wantErr(t, "Lookup after the final ack", err, resume.ErrAcknowledged)
}

// An ack past the last message the request gave out is refused and changes
// nothing: applied, it would skip the messages still to come, the response among
// them.
func TestAckAhead(t *testing.T) {
	e, _ := newEngine(t, nil)
	r, _ := start(t, e, `1`, nil)
	appendMsg(t, r, resume.KindNotification, "")
	appendMsg(t, r, resume.KindNotification, "")
	wantErr(t, "Touch(3)", r.Touch(3), resume.ErrAckAhead)
	s := newSink()
	wantErr(t, "Attach(ack=3)", r.Attach(s, 3), resume.ErrAckAhead)
	if got := s.seqs(t); len(got) != 0 {
		t.Fatalf("a refused Attach wrote %v", got)
	}
	if st := r.Status(); st.State != resume.StateProcessing || st.QueuedBytes == 0 {
		t.Fatalf("Status after refused acks = %+v, want processing with both messages queued", st)
	}
	// Not switched to ack mode: a message written from now on is dropped as
	// delivered.
	attach(t, r, s, 2)
	appendMsg(t, r, resume.KindNotification, "")
	final := complete(t, r)
	wantSeqs(t, "after the refusals", s.seqs(t), 3, final)
	wantErr(t, "Touch(final+1)", r.Touch(final+1), resume.ErrAckAhead)
	// Touch acking the final response frees the request; its status still says
	// how it ended.
	if err := r.Touch(final); err != nil {
		t.Fatalf("Touch(final): %v", err)
	}
	if st := r.Status(); st.State != resume.StateCompleted || st.HasPending {
		t.Fatalf("Status after the final ack = %+v, want completed, nothing pending", st)
	}
	if !r.Gone() {
		t.Fatal("the request outlived the ack of its response")
	}
}

func TestServerRequest(t *testing.T) {
	e, _ := newEngine(t, nil)
	r, _ := start(t, e, `1`, nil)
	a := newSink()
	attach(t, r, a, 0)
	req := appendMsg(t, r, resume.KindRequest, "")
	appendMsg(t, r, resume.KindNotification, "")
	if st := r.Status(); !st.HasInput || !st.HasPending {
		t.Fatalf("Status with an unanswered request = %+v, want HasInput, HasPending", st)
	}
	r.Detach(a)

	b := newSink()
	attach(t, r, b, 0)
	wantSeqs(t, "re-attached sink", b.seqs(t), req)
	if got := b.received(t); got[0].kind != "request" {
		t.Fatalf("re-sent a %s, want the request", got[0].kind)
	}
	r.Resolve(req + 100) // not a queued message: no effect
	if !r.Status().HasInput {
		t.Fatal("Resolve of an unknown seq answered the request")
	}
	r.Resolve(req)
	if st := r.Status(); st.HasInput || st.HasPending {
		t.Fatalf("Status after Resolve = %+v, want no input, nothing pending", st)
	}
	c := newSink()
	attach(t, r, c, 0)
	if got := c.seqs(t); len(got) != 0 {
		t.Fatalf("after Resolve, Attach wrote %v", got)
	}
}

// msgSize is the encoded size of a test message with an empty key.
var msgSize = len(encoder("notification", "")(1))

func TestBudgetCoalescesProgress(t *testing.T) {
	e, _ := newEngine(t, &resume.Options{QueueBytes: msgSize * 3 / 2})
	r, _ := start(t, e, `1`, nil)
	var last uint64
	for range 50 {
		last = appendMsg(t, r, resume.KindProgress, "p")
	}
	other := appendMsg(t, r, resume.KindProgress, "q")
	st := r.Status()
	if st.Dropped != 0 {
		t.Fatalf("Status = %+v: coalescing counted as dropping", st)
	}
	a := newSink()
	attach(t, r, a, 0)
	wantSeqs(t, "coalesced progress", a.seqs(t), last, other)
}

func TestBudgetDropsNotifications(t *testing.T) {
	const budget = 2000
	e, _ := newEngine(t, &resume.Options{QueueBytes: budget})
	r, _ := start(t, e, `1`, nil)
	req := appendMsg(t, r, resume.KindRequest, "")
	const notes = 40
	newest := map[string]uint64{}
	for i := range notes {
		appendMsg(t, r, resume.KindNotification, "")
		key := fmt.Sprintf("p%d", i%2)
		newest[key] = appendMsg(t, r, resume.KindProgress, key)
	}
	st := r.Status()
	if st.Dropped == 0 {
		t.Fatalf("Status = %+v, want dropped notifications", st)
	}
	if st.QueuedBytes > budget {
		t.Fatalf("QueuedBytes = %d, over the budget %d with only droppable messages to drop", st.QueuedBytes, budget)
	}
	final := complete(t, r)
	st = r.Status() // the response pushed out one more notification

	a := newSink()
	attach(t, r, a, 0)
	got := a.received(t)
	seqs := a.seqs(t)
	if !slices.IsSorted(seqs) {
		t.Fatalf("replay out of order: %v", seqs)
	}
	if seqs[0] != req || seqs[len(seqs)-1] != final {
		t.Fatalf("replay %v lacks the request (%d) or the response (%d)", seqs, req, final)
	}
	delivered := 0
	for _, m := range got {
		if m.kind == "notification" {
			delivered++
		}
	}
	if uint64(notes-delivered) != st.Dropped {
		t.Fatalf("%d of %d notifications delivered, Dropped = %d", delivered, notes, st.Dropped)
	}
	for key, seq := range newest {
		if !slices.Contains(seqs, seq) {
			t.Errorf("newest progress of %s (seq %d) missing from %v", key, seq, seqs)
		}
	}
}

func TestBudgetKeepsRequestsAndResponse(t *testing.T) {
	e, _ := newEngine(t, &resume.Options{QueueBytes: msgSize})
	r, _ := start(t, e, `1`, nil)
	var want []uint64
	size := 0
	for range 20 {
		seq := appendMsg(t, r, resume.KindRequest, "")
		want = append(want, seq)
		size += len(encoder("request", "")(seq))
	}
	seq := complete(t, r)
	want = append(want, seq)
	size += len(encoder("response", "")(seq))
	if st := r.Status(); st.Dropped != 0 || st.QueuedBytes != size {
		t.Fatalf("Status = %+v, want nothing dropped and %d bytes queued", st, size)
	}
	a := newSink()
	attach(t, r, a, 0)
	wantSeqs(t, "replay", a.seqs(t), want...)
}

// Many goroutines append while connections come and go. Run with -race. Each sink
// gets strictly ascending seqs (so none twice), and a client resuming with the
// highest seq it saw gets every message.
func TestConcurrentAppendAttach(t *testing.T) {
	const (
		nAppenders = 8
		perG       = 1000
	)
	// A budget no queue reaches, and no progress history: this test is about
	// delivery, and the budget (or the history, past 10 s) would rightly
	// coalesce and drop when delivery lags behind under -race.
	e, _ := newEngine(t, &resume.Options{QueueBytes: 1 << 30, ProgressHistory: -1})
	r, _ := start(t, e, `1`, &resume.StartOptions{AckMode: true})

	var (
		mu    sync.Mutex // guards sinks
		sinks []*testSink
	)
	highest := func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		var h uint64
		for _, s := range sinks {
			h = max(h, s.top(t))
		}
		return h
	}
	newAttachment := func(s *testSink) {
		ack := highest()
		mu.Lock()
		sinks = append(sinks, s)
		mu.Unlock()
		if err := r.Attach(s, ack); err != nil {
			t.Errorf("Attach: %v", err)
		}
	}

	var appended atomic.Int64
	var appenders sync.WaitGroup
	for range nAppenders {
		appenders.Go(func() {
			for i := range perG {
				k := resume.KindNotification
				if i%3 == 0 {
					k = resume.KindProgress
				}
				if _, err := r.Append(k, fmt.Sprint(i), encoder(kindNames[k], fmt.Sprint(i))); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				appended.Add(1)
				if i%16 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	stop := make(chan struct{})
	var controller sync.WaitGroup
	controller.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var s *testSink
			if i%4 == 0 {
				s = failingSink(i % 7)
			} else {
				s = newSink()
			}
			newAttachment(s)
			runtime.Gosched()
		}
	})
	controller.Go(func() { // connections drop and clients poll
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			var s *testSink
			if len(sinks) > 0 {
				s = sinks[len(sinks)-1]
			}
			mu.Unlock()
			if i%2 == 0 && s != nil {
				r.Detach(s)
			} else if err := r.Touch(highest()); err != nil {
				t.Errorf("Touch: %v", err)
			}
			runtime.Gosched()
		}
	})
	appenders.Wait()
	close(stop)
	controller.Wait()

	final := newSink()
	newAttachment(final)
	last, err := r.Complete(false, encoder("response", ""))
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if want := uint64(appended.Load()) + 1; last != want {
		t.Fatalf("final seq %d, want %d", last, want)
	}

	seen := make([]bool, last+1)
	writes, failures := 0, 0
	for i, s := range sinks {
		got := s.seqs(t)
		writes += len(got)
		failures += s.failures()
		for j := 1; j < len(got); j++ {
			if got[j] <= got[j-1] {
				t.Fatalf("sink %d: seq %d after %d (%v)", i, got[j], got[j-1], got)
			}
		}
		for _, seq := range got {
			seen[seq] = true
		}
	}
	for seq := uint64(1); seq <= last; seq++ {
		if !seen[seq] {
			t.Fatalf("seq %d reached no sink", seq)
		}
	}
	t.Logf("%d messages, %d writes to %d sinks, %d failed writes", last, writes, len(sinks), failures)
}

// writeBlocked attaches a gateSink to r (written holding room for room
// messages) and appends a message, which its Write blocks on: appended is
// closed once the Append returns. Within a synctest bubble.
func writeBlocked(t *testing.T, r *resume.Request, room int) (_ *gateSink, appended <-chan struct{}) {
	g := &gateSink{gate: make(chan struct{}), written: make(chan []byte, room)}
	attach(t, r, g, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		appendAsync(t, r) // written by Append: blocks in g
	}()
	synctest.Wait()
	return g, done
}

// gateSink blocks every Write until its gate is closed; entered, when set, is
// told of each Write as it starts.
type gateSink struct {
	gate    chan struct{}
	written chan []byte
	entered chan struct{}
}

func (s *gateSink) Write(ctx context.Context, m resume.Message) error {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	select {
	case <-s.gate:
		s.written <- m.Data
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retention that ends while the final response is being written to an attached
// client waits for the write: the response is not lost mid-way.
func TestRetentionWaitsForWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{Retention: time.Second})
		r, tok := start(t, e, `1`, nil)
		s := &gateSink{gate: make(chan struct{}), written: make(chan []byte, 1)}
		attach(t, r, s, 0)
		done := make(chan struct{})
		go func() {
			defer close(done)
			complete(t, r) // writes synchronously: blocks in the sink
		}()
		time.Sleep(10 * time.Second) // long past retention, the write still blocked
		synctest.Wait()
		if r.Gone() {
			t.Fatal("the request was released while its response was being written")
		}
		close(s.gate)
		<-done
		if got := decode(t, <-s.written); got.seq != 1 {
			t.Fatalf("response seq %d, want 1", got.seq)
		}
		time.Sleep(2 * time.Second) // retention, counted again after the write
		synctest.Wait()
		if !r.Gone() {
			t.Fatal("the request outlived its retention after the write")
		}
		if _, err := e.Lookup(tok, []byte(`1`)); !errors.Is(err, resume.ErrExpired) {
			t.Fatalf("Lookup after retention: %v", err)
		}
	})
}

// A request that lives on after its client went away (here: its result, kept for
// retention) holds nothing of the sink it was detached from: on Streamable HTTP a
// sink is a whole HTTP response with its buffers.
func TestDetachedSinkIsReleased(t *testing.T) {
	e, _ := newEngine(t, nil)
	sink := newSink()
	released := make(chan struct{})
	runtime.AddCleanup(sink, func(ch chan struct{}) { close(ch) }, released)
	r, _ := start(t, e, "1", &resume.StartOptions{Sink: sink})
	complete(t, r)
	r.Detach(sink)
	sink = nil
	// A cleanup runs on a goroutine of its own once a collection found the sink
	// unreachable: wait for it, a while after each collection.
	for range 10 {
		runtime.GC()
		select {
		case <-released:
			if st := r.Status(); st.State != resume.StateCompleted || !st.HasPending {
				t.Fatalf("status %+v, want completed with its result kept", st)
			}
			return
		case <-time.After(time.Second):
		}
	}
	t.Fatal("the detached sink is still referenced after 10 collections")
}

// A client that resumes while its old connection is still writing a message
// (the old one dropped mid-write, or the resume came first) gets the message
// once: the new attachment waits for that write's outcome before it replays.
// A write that stalls does not hold the resume up for longer than a moment.
func TestTakeoverWaitsForWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, nil)
		r, _ := start(t, e, `1`, nil)
		a, appended := writeBlocked(t, r, 2)

		b := newSink()
		attached := make(chan struct{})
		go func() {
			defer close(attached)
			if err := r.Attach(b, 0); err != nil {
				t.Error(err)
			}
		}()
		synctest.Wait()
		wantSeqs(t, "sink B while A writes", b.seqs(t))
		close(a.gate) // the write to A completes: the message is delivered
		<-appended
		<-attached
		if got := decode(t, <-a.written); got.seq != 1 {
			t.Fatalf("sink A got seq %d, want 1", got.seq)
		}
		wantSeqs(t, "sink B after A's write", b.seqs(t))

		// A stalled write: the next attachment replays after a while.
		c := &gateSink{gate: make(chan struct{}), written: make(chan []byte, 2)}
		attach(t, r, c, 0)
		go appendAsync(t, r)
		synctest.Wait()
		d := newSink()
		start := time.Now()
		attach(t, r, d, 0)
		if waited := time.Since(start); waited <= 0 || waited > time.Second {
			t.Fatalf("the resume waited %v for a stalled write", waited)
		}
		wantSeqs(t, "sink D after C stalled", d.seqs(t), 2)
		close(c.gate)
		synctest.Wait()

		// With acks, a resume does not wait: the client drops what it gets twice.
		f := &gateSink{gate: make(chan struct{}), written: make(chan []byte, 2)}
		if err := r.AttachAcked(f, 2); err != nil {
			t.Fatal(err)
		}
		go appendAsync(t, r)
		synctest.Wait()
		g := newSink()
		start = time.Now()
		if err := r.AttachAcked(g, 2); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("a resume with acks waited %v for the old connection's write", waited)
		}
		wantSeqs(t, "sink G, with acks", g.seqs(t), 3)
		close(f.gate)
		synctest.Wait()
	})
}

// A call sent again (AttachAll) while the lost connection is still writing
// one of its messages: that message, delivered when the write completes, is
// in the replay window the new attachment writes first; none is lost.
func TestAttachAllDuringWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, nil)
		r, _ := start(t, e, `1`, nil)
		a, appended := writeBlocked(t, r, 2) // seq 1
		b := newSink()
		attached := make(chan struct{})
		go func() {
			defer close(attached)
			if err := r.AttachAll(b); err != nil {
				t.Error(err)
			}
		}()
		synctest.Wait()
		close(a.gate) // the write to a completes: seq 1 delivered there
		<-appended
		<-attached
		synctest.Wait()
		appendAsync(t, r) // seq 2, to b
		synctest.Wait()
		wantSeqs(t, "sink B, attached with everything while A wrote seq 1", b.seqs(t), 1, 2)
	})
}

// appendAsync is appendMsg of a notification for a goroutine of the test's.
func appendAsync(t *testing.T, r *resume.Request) {
	if _, err := r.Append(resume.KindNotification, "", encoder("notification", "")); err != nil {
		t.Error(err)
	}
}

// Progress of several keys, interleaved: under the budget every message stays;
// past it, all but the newest of each key go at once, and what comes after
// stays until the budget is passed again.
func TestBudgetCoalescesInterleavedKeys(t *testing.T) {
	e, _ := newEngine(t, &resume.Options{QueueBytes: msgSize*20 + msgSize/2})
	r, _ := start(t, e, `1`, nil)
	keys := []string{"p", "q", "r"}
	for i := range 30 {
		appendMsg(t, r, resume.KindProgress, keys[i%3])
	}
	a := newSink()
	attach(t, r, a, 0)
	// The 21st passed the budget: 19, 20 and 21 were the newest of their keys.
	wantSeqs(t, "coalesced progress", a.seqs(t), 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30)
}

// Release frees a request only once it has ended and its final response was
// written to a client; one still running, or ended with no client attached,
// stays for its client to come back to.
func TestRelease(t *testing.T) {
	e, _ := newEngine(t, nil)
	running, _ := start(t, e, `1`, nil)
	running.Release()
	unread, _ := start(t, e, `2`, nil)
	complete(t, unread)
	unread.Release()
	if running.Gone() || unread.Gone() {
		t.Fatalf("Release freed a request no client received the result of: running gone %v, completed detached gone %v", running.Gone(), unread.Gone())
	}
	read, _ := start(t, e, `3`, nil)
	s := newSink()
	attach(t, read, s, 0)
	complete(t, read)
	wantSeqs(t, "the sink", s.seqs(t), 1)
	read.Release()
	if !read.Gone() {
		t.Fatal("Release kept a result written to its client")
	}
	// A client in ack mode says itself when it has the result.
	acked, _ := start(t, e, `4`, &resume.StartOptions{AckMode: true})
	sa := newSink()
	attach(t, acked, sa, 0)
	complete(t, acked)
	wantSeqs(t, "the ack-mode sink", sa.seqs(t), 1)
	acked.Release()
	if acked.Gone() {
		t.Fatal("Release freed an ack-mode request's result before its ack")
	}
	// A client that ends its session as its result is being written (it may
	// have read it already): the write that succeeds frees the request.
	racing, _ := start(t, e, `5`, nil)
	g := &gateSink{gate: make(chan struct{}), written: make(chan []byte, 1), entered: make(chan struct{}, 1)}
	attach(t, racing, g, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		complete(t, racing) // blocks in the sink's Write
	}()
	<-g.entered
	racing.Detach(g) // its stream closed (it ended with the response) before the session
	racing.Release()
	close(g.gate)
	<-done
	<-g.written
	if !racing.Gone() {
		t.Fatal("Release as the response was being written: the result is kept after the write succeeded")
	}
}

// A token never begins with '-', which a command line would take for a flag
// (mcp-resume status ID TOKEN failed so for one token in 64); among 2,000, some
// would otherwise.
func TestTokenNotAFlag(t *testing.T) {
	e, _ := newEngine(t, nil)
	for i := range 2000 {
		r, tok := start(t, e, strconv.Itoa(i), nil)
		if strings.HasPrefix(tok, "-") {
			t.Fatalf("token %d begins with '-'", i)
		}
		r.Cancel()
	}
}

// A detached request holds its last attachment's write lock only while a
// write of it is in flight (which a new attachment's first drain waits for),
// not for the rest of its life.
func TestDetachedLetsWriteLockGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, nil)
		r, _ := start(t, e, `1`, nil)
		s := newSink()
		attach(t, r, s, 0)
		appendMsg(t, r, resume.KindNotification, "")
		r.Detach(s)
		if resume.HoldsWriteLock(r) {
			t.Error("a request detached with no write in flight holds its write lock")
		}

		g, appended := writeBlocked(t, r, 1)
		r.Detach(g)
		if !resume.HoldsWriteLock(r) {
			t.Error("a request detached during a write lets its write lock go before the write ended")
		}
		close(g.gate)
		<-appended
		synctest.Wait()
		if resume.HoldsWriteLock(r) {
			t.Error("the write lock is held after the detached attachment's write ended")
		}
	})
}
