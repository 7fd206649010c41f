package cluster_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/cluster"
	"github.com/mcp-resume/mcp-resume/resume/internal/wire"
)

func message(seq uint64, key string) resume.Message {
	return resume.Message{Seq: seq, Kind: resume.Kind(seq%4 + 1), Key: key, Data: fmt.Appendf(nil, `{"seq":%d,"key":%q}`, seq, key)}
}

// TestDeliverOrder: 1,000 messages from one sender reach deliver whole and in
// order, then 1,000 from ten concurrent senders reach it one at a time, each
// sender's in order.
func TestDeliverOrder(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	var (
		inflight atomic.Int32
		mu       sync.Mutex // guards got
		got      []resume.Message
	)
	inbox, closeInbox := a.Listen(func(m resume.Message) error {
		if inflight.Add(1) != 1 {
			t.Error("deliver called concurrently")
		}
		defer inflight.Add(-1)
		time.Sleep(20 * time.Microsecond) // widens the window in which a second call would overlap
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
		return nil
	})
	defer closeInbox()

	start := time.Now()
	ctx := ctxT(t)
	for i := range uint64(1000) {
		if err := b.Deliver(ctx, inbox, message(i, "one")); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("1,000 Delivers in turn: %s", time.Since(start))
	mu.Lock()
	first := got
	got = nil
	mu.Unlock()
	if len(first) != 1000 {
		t.Fatalf("%d messages delivered, want 1000", len(first))
	}
	for i, m := range first {
		if want := message(uint64(i), "one"); !reflect.DeepEqual(m, want) {
			t.Fatalf("message %d is %+v, want %+v", i, m, want)
		}
	}

	start = time.Now()
	var wg sync.WaitGroup
	for s := range 10 {
		wg.Go(func() {
			for i := range uint64(100) {
				if err := b.Deliver(ctx, inbox, message(i, fmt.Sprint("s", s))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("1,000 Delivers from 10 senders: %s", time.Since(start))
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1000 {
		t.Fatalf("%d messages delivered, want 1000", len(got))
	}
	next := make(map[string]uint64)
	for _, m := range got {
		if want := message(next[m.Key], m.Key); !reflect.DeepEqual(m, want) {
			t.Fatalf("from %s: %+v, want %+v", m.Key, m, want)
		}
		next[m.Key]++
	}
}

func TestDeliverError(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	inbox, closeInbox := a.Listen(func(m resume.Message) error {
		if m.Seq == 7 {
			return fmt.Errorf("sink %d broke", m.Seq)
		}
		return nil
	})
	defer closeInbox()
	if err := b.Deliver(ctxT(t), inbox, message(6, "")); err != nil {
		t.Fatal(err)
	}
	err := b.Deliver(ctxT(t), inbox, message(7, ""))
	if err == nil || err.Error() != "sink 7 broke" {
		t.Errorf("Deliver: %v, want deliver's error", err)
	}
	if err := b.Deliver(ctxT(t), inbox, message(8, "")); err != nil {
		t.Errorf("Deliver after an error: %v", err)
	}
	if err := b.Deliver(ctxT(t), "mr.ctl.alpha", message(9, "")); err == nil {
		t.Error("Deliver to a control subject succeeded")
	}
}

func TestDeliverAfterClose(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	var n atomic.Int32
	deliver := func(resume.Message) error { n.Add(1); return nil }
	inbox, closeInbox := a.Listen(deliver)
	if err := b.Deliver(ctxT(t), inbox, message(1, "")); err != nil {
		t.Fatal(err)
	}
	closeInbox()
	closeInbox() // idempotent
	start := time.Now()
	if err := b.Deliver(ctxT(t), inbox, message(2, "")); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("Deliver to a closed inbox: %v, want no responders", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Deliver to a closed inbox took %s", d)
	}

	// Closing the node closes its inboxes.
	inbox2, _ := a.Listen(deliver)
	if err := b.Deliver(ctxT(t), inbox2, message(3, "")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := b.Deliver(ctxT(t), inbox2, message(4, "")); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("Deliver to an inbox of a closed node: %v, want no responders", err)
	}
	if err := a.Deliver(ctxT(t), inbox2, message(5, "")); !errors.Is(err, cluster.ErrClosed) {
		t.Errorf("Deliver from a closed node: %v, want ErrClosed", err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("deliver called %d times, want 2", got)
	}
}

func TestInboxOwner(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	ia, closeA := a.Listen(func(resume.Message) error { return nil })
	defer closeA()
	ib, closeB := b.Listen(func(resume.Message) error { return nil })
	defer closeB()
	ia2, closeA2 := a.Listen(func(resume.Message) error { return nil })
	defer closeA2()
	if ia == ia2 {
		t.Errorf("two inboxes named %s", ia)
	}
	if !strings.HasPrefix(ia, "mr.ctl.alpha.in.") {
		t.Errorf("inbox %s, want mr.ctl.alpha.in.<id>", ia)
	}
	for _, n := range []*cluster.Node{a, b} {
		if got := n.InboxOwner(ia); got != "alpha" {
			t.Errorf("InboxOwner(%s) = %q, want alpha", ia, got)
		}
		if got := n.InboxOwner(ib); got != "beta" {
			t.Errorf("InboxOwner(%s) = %q, want beta", ib, got)
		}
	}
	for _, s := range []string{"", "mr.ctl", "mr.ctl.alpha", "mr.ctl.alpha.in.", "mr.ctl..in.x", "mr.ctl.al pha.in.x",
		"mr.ctl.alpha.in.x.y", "mr.ctl.alpha.in.*", "mr.ctl.alpha.out.x", "other.alpha.in.x", "mr.ctlx.alpha.in.x", "mr.ctl.a.b.in.x"} {
		if got := a.InboxOwner(s); got != "" {
			t.Errorf("InboxOwner(%q) = %q, want none", s, got)
		}
	}
}

// A delivery that reached an inbox before it closed, waiting behind the one
// its deliver runs, is answered that the inbox is closed: not dropped, which
// left its sender waiting CallTimeout for an answer (an engine writing to an
// await call's inbox as the await answered, and its tool's notifications
// queued behind that write, waited the 5 s).
func TestDeliverAsTheInboxCloses(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	a, anc := join(t, srv, options(t, "alpha"))
	b, bnc := join(t, srv, options(t, "beta"))
	entered, release := make(chan struct{}), make(chan struct{})
	inbox, closeInbox := a.Listen(func(m resume.Message) error {
		if m.Seq == 1 {
			close(entered)
			<-release
		}
		return nil
	})
	first := make(chan error, 1)
	go func() { first <- b.Deliver(ctxT(t), inbox, message(1, "")) }()
	receive(t, entered, "the first delivery")

	// The second, as Deliver sends it, on b's connection: once both
	// connections have flushed, a's has read it, and it waits in the inbox.
	replies := make(chan *nats.Msg, 1)
	reply := nats.NewInbox()
	rsub, err := bnc.ChanSubscribe(reply, replies)
	if err != nil {
		t.Fatal(err)
	}
	defer rsub.Unsubscribe()
	if err := bnc.PublishMsg(&nats.Msg{Subject: inbox, Reply: reply, Data: wire.EncodeMessage(message(2, ""))}); err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{bnc, anc} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	closeInbox()
	close(release)
	if err := receive(t, first, "the first delivery's answer"); err != nil {
		t.Fatalf("the first delivery: %v", err)
	}
	if got := string(receive(t, replies, "the second delivery's answer").Data); got != "cluster: inbox closed" {
		t.Fatalf("the second delivery was answered %q, want the inbox closed", got)
	}
}
