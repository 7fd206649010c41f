package jsstore_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	open func(b *testing.B) (resume.Store, jetstream.JetStream) // nil JetStream for memstore
}{
	{"memstore", func(*testing.B) (resume.Store, jetstream.JetStream) { return memstore.New(), nil }},
	{"jetstream-periodic", func(b *testing.B) (resume.Store, jetstream.JetStream) { return openJS(b, false) }},
	{"jetstream-always", func(b *testing.B) (resume.Store, jetstream.JetStream) { return openJS(b, true) }},
}

func openJS(b *testing.B, syncAlways bool) (resume.Store, jetstream.JetStream) {
	js, _ := startServer(b, "", syncAlways)
	st, err := jsstore.New(context.Background(), js, nil)
	if err != nil {
		b.Fatal(err)
	}
	return st, js
}

// rawPublishRate returns how many messages of payload's size nats.go publishes
// asynchronously to js's server per second (acknowledged), the ceiling of what a
// store on it can take: n of them on a stream of their own.
func rawPublishRate(b *testing.B, js jetstream.JetStream, n int) float64 {
	ctx := context.Background()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}}); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	for range n {
		if _, err := js.PublishAsync("raw.1", payload); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("raw publishes not acknowledged within a minute")
	}
	return float64(n) / time.Since(t0).Seconds()
}

type nopSink struct{}

func (nopSink) Write(context.Context, resume.Message) error { return nil }

var payload = []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"total":100,"message":"step 1 of 100"}}`)

func progress(uint64) []byte { return payload }

// BenchmarkOutbox: messages of an attached request through the outbox: stored,
// written, and (delivered) discarded; msgs/s beside raw-msgs/s, nats.go's own
// async publishes of messages of the same size to the same server.
func BenchmarkOutbox(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			st, js := bs.open(b)
			e := mustNew(b, st, nil)
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
			if js != nil {
				b.ReportMetric(rawPublishRate(b, js, max(b.N, 1000)), "raw-msgs/s")
			}
		})
	}
}

// BenchmarkOutboxStored: BenchmarkOutbox for a client with acks, acknowledging
// every 1,024th message: each message is written to the stream (a request with
// 256 waiting sends them: the store cannot skip one as it skips a message
// delivered and discarded before it was sent), and deleted once acknowledged.
func BenchmarkOutboxStored(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			st, js := bs.open(b)
			e := mustNew(b, st, nil)
			defer e.Close()
			r, _, err := e.Start([]byte("1"), &resume.StartOptions{Sink: nopSink{}, AckMode: true})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				seq, err := r.Append(resume.KindNotification, "", progress)
				if err != nil {
					b.Fatal(err)
				}
				if seq%1024 == 0 {
					if err := r.Touch(seq); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			if js != nil {
				b.ReportMetric(rawPublishRate(b, js, max(b.N, 1000)), "raw-msgs/s")
			}
		})
	}
}

// BenchmarkReplay1000: a requests/resume that replays 1,000 queued messages (ack
// mode keeps them queued, so every iteration replays the same 1,000), all
// stored: the newest 64 come from the store's memory, the rest from the stream.
func BenchmarkReplay1000(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			st, _ := bs.open(b)
			e := mustNew(b, st, nil)
			defer e.Close()
			r, tok, err := e.Start([]byte("1"), &resume.StartOptions{AckMode: true})
			if err != nil {
				b.Fatal(err)
			}
			for range 1000 {
				if _, err := r.Append(resume.KindNotification, "", progress); err != nil {
					b.Fatal(err)
				}
			}
			if js, ok := st.(*jsstore.Store); ok {
				// Every message stored and indexed by its place in the stream,
				// so that the replay reads the stream.
				if err := js.Sweep(context.Background(), resume.HashToken(tok)); err != nil {
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
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
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
			st, _ := bs.open(b)
			e := mustNew(b, st, nil)
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

// BenchmarkReattachReplay: a client without acks reattaching to a request that
// queued 5,000 notifications (about 650 KB) while detached: each replayed
// message is written, then discarded as delivered.
func BenchmarkReattachReplay(b *testing.B) {
	for _, bs := range benchStores[:2] {
		b.Run(bs.name, func(b *testing.B) {
			st, _ := bs.open(b)
			e := mustNew(b, st, nil)
			defer e.Close()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				r, _, err := e.Start([]byte(strconv.Itoa(i)), nil)
				if err != nil {
					b.Fatal(err)
				}
				for range 5_000 {
					if _, err := r.Append(resume.KindNotification, "", progress); err != nil {
						b.Fatal(err)
					}
				}
				s := &countSink{}
				b.StartTimer()
				if err := r.Attach(s, 0); err != nil { // replays before it returns
					b.Fatal(err)
				}
				b.StopTimer()
				if s.n != 5_000 {
					b.Fatalf("replayed %d messages, want 5,000", s.n)
				}
				r.Cancel()
			}
		})
	}
}
