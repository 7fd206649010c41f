package resume_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

// discardSink accepts every write and keeps nothing.
type discardSink struct{}

func (discardSink) Write(context.Context, resume.Message) error { return nil }

// progressMsg is a realistic progress notification (about 150 bytes).
func progressMsg(tok string, seq uint64) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"io.mcp-resume/seq":%d},"progressToken":%q,"progress":%d,"total":10}}`, seq, tok, seq)
}

// BenchmarkOutboxAppendDeliver measures one Append on an attached request without
// acks: queue in the store, write to the sink, drop as delivered. The message is
// encoded once, outside the loop, so only the engine's cost is measured.
func BenchmarkOutboxAppendDeliver(b *testing.B) {
	e := mustNew(b, memstore.New(), nil)
	defer e.Close()
	r, _, err := e.Start([]byte(`1`), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Attach(discardSink{}, 0); err != nil {
		b.Fatal(err)
	}
	msg := progressMsg("tok-123", 3)
	encode := func(uint64) []byte { return msg }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Append(resume.KindProgress, `"tok-123"`, encode); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st := r.Status(); st.HasPending {
		b.Fatalf("delivered messages still queued: %+v", st)
	}
}

// BenchmarkDetachedRequestMemory measures the heap held per detached request with
// ten queued progress notifications, in B/req: on an engine without a Store (what
// serve runs without --data-dir or --nats-url) and over memstore.
func BenchmarkDetachedRequestMemory(b *testing.B) {
	for _, mode := range []struct {
		name  string
		store func() resume.Store
	}{
		{"store=none", func() resume.Store { return nil }},
		{"store=memstore", func() resume.Store { return memstore.New() }},
	} {
		b.Run(mode.name, func(b *testing.B) { detachedRequestMemory(b, mode.store) })
	}
}

func detachedRequestMemory(b *testing.B, store func() resume.Store) {
	const (
		requests = 100_000
		perReq   = 10
	)
	b.ReportAllocs()
	var total uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()

		e := mustNew(b, store(), &resume.Options{MaxLive: 2 * requests, MaxWait: 24 * time.Hour})
		for n := range requests {
			r, _, err := e.Start(strconv.AppendInt(nil, int64(n), 10), nil)
			if err != nil {
				b.Fatal(err)
			}
			tok := "tok-" + strconv.Itoa(n)
			key := strconv.Quote(tok)
			for range perReq {
				if _, err := r.Append(resume.KindProgress, key, func(seq uint64) []byte { return progressMsg(tok, seq) }); err != nil {
					b.Fatal(err)
				}
			}
		}

		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if e.Live() != requests {
			b.Fatalf("Live() = %d, want %d", e.Live(), requests)
		}
		total += after.HeapAlloc - before.HeapAlloc
		e.Close()
		runtime.KeepAlive(e)
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/float64(b.N)/requests, "B/req")
}

// BenchmarkStartComplete measures the engine's own cost of one resumable request
// as the core makes it for a short tools/call: Start attached to a sink, Complete
// with a prebuilt response, which is written to the sink and then retained for
// DeliveredRetention (default options, so results pile up as in a busy server).
// store=none is the core's default (the engine keeps the messages itself);
// full: MaxRetained (10,000 here) results are kept before the first request,
// so each one that ends releases the oldest, as in a server that has been busy
// for a while.
func BenchmarkStartComplete(b *testing.B) {
	resp := []byte(`{"jsonrpc":"2.0","id":12345,"result":{"_meta":{"io.mcp-resume/seq":1},"content":[{"type":"text","text":"hello"}]}}`)
	encode := func(uint64) []byte { return resp }
	id := []byte(`12345`)
	call := func(b *testing.B, e *resume.Engine) {
		r, _, err := e.Start(id, &resume.StartOptions{Sink: discardSink{}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Complete(false, encode); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name  string
		store resume.Store
		full  int
	}{{"store=none", nil, 0}, {"store=mem", memstore.New(), 0}, {"store=none/full", nil, 10_000}} {
		b.Run(bc.name, func(b *testing.B) {
			e := mustNew(b, bc.store, &resume.Options{MaxRetained: bc.full}) // 0: the default, 100,000
			defer e.Close()
			for range bc.full {
				call(b, e)
			}
			b.ReportAllocs()
			for b.Loop() {
				call(b, e)
			}
		})
	}
}

// BenchmarkLookupRefused compares the two refusals a caller without the right to a
// request can get, which must be one answer in one timing class: a token nobody
// issued, and a live request's token presented by another principal. Compare the
// two lines' ns/op (the SHA-256 of the token dominates both).
func BenchmarkLookupRefused(b *testing.B) {
	eng := mustNew(b, memstore.New(), nil)
	defer eng.Close()
	id := []byte(`7`)
	_, tok, err := eng.Start(id, &resume.StartOptions{Principal: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	other := "x" + tok[1:]
	if other == tok {
		other = "y" + tok[1:]
	}
	for _, bc := range []struct{ name, token, principal string }{
		{"unknown-token", other, "alice"},
		{"other-principal", tok, "bob"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := eng.LookupAs(bc.token, id, bc.principal); err == nil {
					b.Fatal("found")
				}
			}
		})
	}
}

// BenchmarkAppendOverBudget measures one Append of a principal past its byte
// budget (its request holds server-to-client requests, which cannot go, and it
// has no kept result left to release) on an engine keeping 20,000 results of
// other clients: what every message of such a principal's requests costs.
func BenchmarkAppendOverBudget(b *testing.B) {
	e := mustNew(b, nil, &resume.Options{MaxBytesPerPrincipal: 1 << 10})
	defer e.Close()
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	for i := range 20_000 {
		r, _, err := e.Start([]byte(strconv.Itoa(i)), nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Complete(false, func(uint64) []byte { return resp }); err != nil {
			b.Fatal(err)
		}
	}
	r, _, err := e.Start([]byte(`"a"`), &resume.StartOptions{Principal: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	question := make([]byte, 2<<10)
	if _, err := r.Append(resume.KindRequest, "", func(uint64) []byte { return question }); err != nil {
		b.Fatal(err)
	}
	msg := progressMsg("tok-123", 3)
	encode := func(uint64) []byte { return msg }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Append(resume.KindProgress, `"tok-123"`, encode); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReattachReplay measures a client without acks reattaching to a
// request that queued 5,000 notifications (about 750 KB) while detached: each
// one written, and dropped as delivered.
func BenchmarkReattachReplay(b *testing.B) {
	e := mustNew(b, nil, nil)
	defer e.Close()
	msg := progressMsg("tok-123", 3)
	encode := func(uint64) []byte { return msg }
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r, _, err := e.Start([]byte(strconv.Itoa(i)), nil)
		if err != nil {
			b.Fatal(err)
		}
		for range 5_000 {
			if _, err := r.Append(resume.KindNotification, "", encode); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := r.Attach(discardSink{}, 0); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if st := r.Status(); st.HasPending || st.QueuedBytes != 0 {
			b.Fatalf("after the replay: %+v", st)
		}
		r.Cancel()
	}
}

// BenchmarkAppendDetachedFull measures one Append of a detached request whose
// queue is at its byte budget (QueueBytes, 1 MiB: about 6,500 such messages), so
// that each message queued drops the oldest: a tool that streams while its
// client is away. kind=progress: progress of one token, each replacing the last
// under pressure; kind=notification: notifications, oldest dropped first.
func BenchmarkAppendDetachedFull(b *testing.B) {
	for _, k := range []struct {
		name string
		kind resume.Kind
		key  string
	}{{"kind=progress", resume.KindProgress, `"tok-123"`}, {"kind=notification", resume.KindNotification, ""}} {
		b.Run(k.name, func(b *testing.B) {
			e := mustNew(b, nil, nil)
			defer e.Close()
			r, _, err := e.Start([]byte(`1`), nil)
			if err != nil {
				b.Fatal(err)
			}
			msg := progressMsg("tok-123", 3)
			encode := func(uint64) []byte { return msg }
			for range (1 << 20) / len(msg) * 2 {
				if _, err := r.Append(resume.KindNotification, "", encode); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Append(k.kind, k.key, encode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
