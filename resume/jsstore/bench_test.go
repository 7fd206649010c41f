package jsstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

// The same engine over the in-memory store and over JetStream (file storage,
// periodic sync and sync always), on an embedded server in this process:
//
//	go test -run '^$' -bench . -benchtime 200x ./resume/jsstore/

var benchStores = []struct {
	name string
	open func(b *testing.B) resume.Store
}{
	{"memstore", func(*testing.B) resume.Store { return memstore.New() }},
	{"jetstream-periodic", func(b *testing.B) resume.Store { return openJS(b, false) }},
	{"jetstream-always", func(b *testing.B) resume.Store { return openJS(b, true) }},
}

func openJS(b *testing.B, syncAlways bool) resume.Store {
	js, _ := startServer(b, "", syncAlways)
	st, err := jsstore.New(context.Background(), js, nil)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

type nopSink struct{}

func (nopSink) Write(context.Context, resume.Message) error { return nil }

var payload = []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"total":100,"message":"step 1 of 100"}}`)

func progress(uint64) []byte { return payload }

// BenchmarkOutbox: messages of an attached request through the outbox: stored,
// written, and (delivered) discarded.
func BenchmarkOutbox(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			e := resume.New(bs.open(b), nil)
			defer e.Close()
			r, _, err := e.Start([]byte("1"), &resume.StartOptions{Sink: nopSink{}})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := r.Append(resume.KindNotification, "", progress); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkResume1000: a requests/resume that replays 1,000 queued messages (ack
// mode keeps them queued, so every iteration replays the same 1,000).
func BenchmarkResume1000(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			e := resume.New(bs.open(b), nil)
			defer e.Close()
			r, _, err := e.Start([]byte("1"), &resume.StartOptions{AckMode: true})
			if err != nil {
				b.Fatal(err)
			}
			for range 1000 {
				if _, err := r.Append(resume.KindNotification, "", progress); err != nil {
					b.Fatal(err)
				}
			}
			var lat []time.Duration
			for b.Loop() {
				s := &countSink{}
				t0 := time.Now()
				if err := r.Attach(s, 0); err != nil { // replays before it returns
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				if s.n != 1000 {
					b.Fatalf("replayed %d messages, want 1000", s.n)
				}
			}
			reportPercentiles(b, lat)
		})
	}
}

type countSink struct{ n int }

func (s *countSink) Write(context.Context, resume.Message) error { s.n++; return nil }

// BenchmarkGetStatus: what requests/getStatus does in the engine (Lookup, Touch,
// Status) on a detached request with queued messages.
func BenchmarkGetStatus(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			e := resume.New(bs.open(b), nil)
			defer e.Close()
			r, tok, err := e.Start([]byte("1"), nil)
			if err != nil {
				b.Fatal(err)
			}
			for range 10 {
				if _, err := r.Append(resume.KindNotification, "", progress); err != nil {
					b.Fatal(err)
				}
			}
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				q, err := e.Lookup(tok, []byte("1"))
				if err != nil {
					b.Fatal(err)
				}
				if err := q.Touch(0); err != nil {
					b.Fatal(err)
				}
				if !q.Status().HasPending {
					b.Fatal("no pending message")
				}
				lat = append(lat, time.Since(t0))
			}
			reportPercentiles(b, lat)
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds())
	}
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}
