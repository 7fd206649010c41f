package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/jstest"
	"github.com/mcp-resume/mcp-resume/transport"
)

// benchModes are the sides of each comparison: the same server with default
// options, a plain client and a client that advertises resumableRequests; and that
// client on a server whose default policy is after:1ms (a quick call never
// becomes resumable: what a server author trades for the resume layer's cost).
var benchModes = []struct {
	name, caps string
	opts       *mcp.Options
}{
	{"resume=off", `{}`, nil},
	{"resume=on", `{"resumableRequests":{}}`, nil},
	{"resume=after1ms", `{"resumableRequests":{}}`, &mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.After, After: time.Millisecond}}},
}

// BenchmarkToolsCall measures a tools/call round trip (echo) through the core over
// an in-memory pipe, with the resume layer on (the client advertises
// resumableRequests: policy notification, engine, outbox, sequence numbers) and off
// (the same server, a plain client). Compare the two lines of one run.
func BenchmarkToolsCall(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			core, err := mcp.New(demo.Server("bench"), mode.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer core.Close()
			client, srv := transport.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = core.Serve(context.Background(), srv)
			}()
			defer func() { _ = client.Close(); <-done }()
			ctx := context.Background()
			roundTrip := func(msg []byte, want int) {
				if err := client.Write(ctx, msg); err != nil {
					b.Fatal(err)
				}
				for range want {
					if _, err := client.Read(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			roundTrip(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":%s,"clientInfo":{"name":"b","version":"1"}}}`, mode.caps), 1)
			_ = client.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
			want := 1
			if mode.name == "resume=on" {
				want = 2 // the policy notification, then the response
			}
			b.ReportAllocs()
			// b.Loop times the loop only: not the setup above, nor the teardown
			// deferred (closing an engine that retains every result of the run).
			for i := 1; b.Loop(); i++ {
				roundTrip(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, i), want)
			}
		})
	}
}

// benchConn is a transport that costs nothing: Read takes messages from a channel,
// Write drops notifications and signals responses. Through it,
// BenchmarkCoreToolsCall measures the core's own work per call (dispatch, mcp-go,
// the resume engine), not goroutine wake-ups of a peer reading each message.
type benchConn struct {
	in     chan []byte
	resp   chan struct{}
	closed chan struct{}
	onResp func([]byte) // sees each response before resp is signalled; may be nil
}

func (c *benchConn) Read(ctx context.Context) ([]byte, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.closed:
		return nil, transport.ErrClosed
	}
}

func (c *benchConn) Write(_ context.Context, msg []byte) error {
	if bytes.HasPrefix(msg, []byte(`{"jsonrpc":"2.0","id":`)) {
		if c.onResp != nil {
			c.onResp(msg)
		}
		c.resp <- struct{}{}
	}
	return nil
}

func (c *benchConn) Close() error { return nil }

func BenchmarkCoreToolsCall(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			call := benchCore(b, mode.caps, mode.opts)
			b.ReportAllocs()
			for i := 1; b.Loop(); i++ { // timed: the loop only (see BenchmarkToolsCall)
				call(i)
			}
		})
	}
}

// BenchmarkCoreToolsCallPaired is BenchmarkCoreToolsCall with its two sides in one
// loop: each iteration makes one call with the resume layer off and one with it on
// (the order alternating), each to its own server in this process, and times each
// call. Both sides thus meet the same machine at the same moments; on a shared
// two-core VM, whose speed drifts by a third between runs, this is what makes the
// ratio (the "on/off" metric) repeatable. Both servers share the process's heap,
// so the garbage collector's marking of the results the resume layer retains is
// paid by both sides alike: the ratio is the core's own work per call, and
// BenchmarkCoreToolsCall (separate runs) shows the rest.
func BenchmarkCoreToolsCallPaired(b *testing.B) {
	off := benchCore(b, benchModes[0].caps, benchModes[0].opts)
	on := benchCore(b, benchModes[1].caps, benchModes[1].opts)
	benchPaired(b, off, on, "on")
}

// benchCore serves one benchConn with a core (options opts) whose client advertised
// caps, and returns a function making tools/call number i (echo) through it. The
// server is closed when b ends.
func benchCore(b *testing.B, caps string, opts *mcp.Options) func(i int) {
	core, err := mcp.New(demo.Server("bench"), opts)
	if err != nil {
		b.Fatal(err)
	}
	conn := &benchConn{in: make(chan []byte, 1), resp: make(chan struct{}, 1), closed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = core.Serve(context.Background(), conn)
	}()
	b.Cleanup(func() {
		close(conn.closed)
		<-done
		core.Close()
	})
	conn.in <- fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":%s,"clientInfo":{"name":"b","version":"1"}}}`, caps)
	<-conn.resp
	conn.in <- []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return func(i int) {
		conn.in <- fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, i)
		<-conn.resp
	}
}

// BenchmarkMCPGoEra measures mcp-go's own HandleMessage on the same echo call in
// each era, with no layer of ours: a 2026-07-28 request carries its envelope in
// params._meta, which mcp-go decodes twice (the era, then the call's params) and
// answers with a decorated result, encoded here as any transport must. It is the
// part of a 2026 call's cost that the core does not add (BenchmarkCoreEra and
// BenchmarkHTTPEra in transport/http measure the whole).
func BenchmarkMCPGoEra(b *testing.B) {
	srv := demo.Server("bench")
	ctx := context.Background()
	for _, era := range []struct{ name, msg string }{
		{"2025", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`},
		{"2026", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"text":"hello"}}}`},
	} {
		b.Run("era="+era.name, func(b *testing.B) {
			msg := []byte(era.msg)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(srv.HandleMessage(ctx, msg)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCoreEra is BenchmarkCoreToolsCallPaired for the two eras: one core
// serves, over in-memory connections, a plain 2025-era client (initialized) and a
// 2026-07-28 client (no initialize, an envelope in every call), one call of each
// in turn. It reports each side's mean round trip and their ratio: what a 2026
// call costs through the core, mcp-go's own share included (BenchmarkMCPGoEra).
func BenchmarkCoreEra(b *testing.B) {
	core, err := mcp.New(demo.Server("bench"), nil)
	if err != nil {
		b.Fatal(err)
	}
	legacy := benchCoreConn(b, core, true)
	modern := benchCoreConn(b, core, false)
	var legacyT, modernT time.Duration
	timed := func(call func(int), i int) time.Duration {
		t := time.Now()
		call(i)
		return time.Since(t)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if n%2 == 0 {
			legacyT += timed(legacy, n)
			modernT += timed(modern, n)
		} else {
			modernT += timed(modern, n)
			legacyT += timed(legacy, n)
		}
	}
	b.ReportMetric(float64(legacyT.Nanoseconds())/float64(n), "2025-ns/call")
	b.ReportMetric(float64(modernT.Nanoseconds())/float64(n), "2026-ns/call")
	b.ReportMetric(float64(modernT)/float64(legacyT), "2026/2025")
}

// benchCoreConn serves one benchConn with core and returns a function making
// tools/call number i (echo) through it: a 2025-era call on an initialized
// session (legacy), or a 2026-07-28 call with its envelope.
func benchCoreConn(b *testing.B, core *mcp.Server, legacy bool) func(i int) {
	conn := &benchConn{in: make(chan []byte, 1), resp: make(chan struct{}, 1), closed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = core.Serve(context.Background(), conn)
	}()
	b.Cleanup(func() {
		close(conn.closed)
		<-done
		core.Close()
	})
	if legacy {
		conn.in <- []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
		<-conn.resp
		conn.in <- []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return func(i int) {
			conn.in <- fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, i)
			<-conn.resp
		}
	}
	return func(i int) {
		conn.in <- fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"text":"hello"}}}`, i)
		<-conn.resp
	}
}

// BenchmarkTasks measures the Tasks extension through the core over an in-memory
// connection: creating a task (a tools/call answered with CreateTaskResult once
// the engine holds the request; the tool itself returns at once) and tasks/get of
// a finished task (its result read from its outbox), with the engine in memory
// and on JetStream (an embedded, file-backed nats-server, --data-dir's store).
// Each reports its median (p50-ns).
func BenchmarkTasks(b *testing.B) {
	for _, store := range []string{"memory", "jetstream"} {
		b.Run("store="+store, func(b *testing.B) {
			opts := &mcp.Options{Tools: map[string]mcp.Policy{"echo": {Mode: mcp.Always, Task: mcp.AsTask}}}
			if store == "jetstream" {
				opts.Store = benchJetStream(b)
			}
			core, err := mcp.New(demo.Server("bench"), opts)
			if err != nil {
				b.Fatal(err)
			}
			conn := &benchConn{in: make(chan []byte, 1), resp: make(chan struct{}, 1), closed: make(chan struct{})}
			var last []byte
			conn.onResp = func(msg []byte) { last = bytes.Clone(msg) }
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = core.Serve(context.Background(), conn)
			}()
			b.Cleanup(func() {
				close(conn.closed)
				<-done
				core.Close()
			})
			const env = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
			call := func(msg string) []byte {
				conn.in <- []byte(msg)
				<-conn.resp
				return last
			}
			b.Run("op=create", func(b *testing.B) {
				var d []time.Duration
				i := 0
				for b.Loop() {
					i++
					t := time.Now()
					call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},%s}}`, i, env))
					d = append(d, time.Since(t))
				}
				reportP50(b, d)
			})
			// One finished task, read again and again.
			created := call(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + env + `}}`)
			var r struct {
				Result struct{ TaskID string } `json:"result"`
			}
			if err := json.Unmarshal(created, &r); err != nil || r.Result.TaskID == "" {
				b.Fatalf("no task: %s", created)
			}
			get := fmt.Sprintf(`{"jsonrpc":"2.0","id":"g","method":"tasks/get","params":{"taskId":%q,%s}}`, r.Result.TaskID, env)
			for !bytes.Contains(call(get), []byte(`"completed"`)) {
				time.Sleep(time.Millisecond)
			}
			b.Run("op=get", func(b *testing.B) {
				var d []time.Duration
				for b.Loop() {
					t := time.Now()
					call(get)
					d = append(d, time.Since(t))
				}
				reportP50(b, d)
			})
		})
	}
}

func reportP50(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
}

// benchJetStream starts an embedded, file-backed nats-server and returns a store on it.
func benchJetStream(b *testing.B) resume.Store {
	st, _, _ := jstest.Start(b, false)
	return st
}

// BenchmarkTaskStream measures tasks/stream over an in-memory connection.
// op=live: a task of countdown sending 2,000 progress notifications at once,
// streamed from its creation: events per second to the client, beside the same
// countdown as a plain resumable call (progress per second). op=replay: a
// finished task of 1,000 events read from the start, p50 per read; with
// JetStream, by a second engine started on the store after the first closed
// (a restart).
func BenchmarkTaskStream(b *testing.B) {
	for _, store := range []string{"memory", "jetstream"} {
		b.Run("store="+store, func(bs *testing.B) {
			var st resume.Store
			if store == "jetstream" {
				st, _, _ = jstest.Start(bs, false)
			}
			core, err := mcp.New(demo.Server("bench"), &mcp.Options{Store: st, Tools: demo.Policies(), Engine: &resume.Options{QueueBytes: 64 << 20}})
			if err != nil {
				bs.Fatal(err)
			}
			bs.Run("op=live", func(b *testing.B) {
				const steps = 2000
				// A raw reader: what is measured is the server, not a client's
				// decoding of each message.
				conn := serveCore(bs, core)(bs)
				ctx := context.Background()
				write := func(format string, args ...any) {
					if err := conn.Write(ctx, fmt.Appendf(nil, format, args...)); err != nil {
						b.Fatal(err)
					}
				}
				// until reads to the response with id, counting the messages
				// that contain what, and returns the response.
				until := func(id, what string) ([]byte, int) {
					n, end := 0, []byte(`"id":"`+id+`"`)
					for {
						msg, err := conn.Read(ctx)
						if err != nil {
							b.Fatal(err)
						}
						if bytes.Contains(msg, end) && !bytes.Contains(msg, []byte(`"method"`)) {
							return msg, n
						}
						if bytes.Contains(msg, []byte(what)) {
							n++
						}
					}
				}
				write(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"b","version":"1"}}}`)
				if _, err := conn.Read(ctx); err != nil {
					b.Fatal(err)
				}
				var streamed, called time.Duration
				i := 0
				for b.Loop() {
					i++
					t0 := time.Now()
					write(`{"jsonrpc":"2.0","id":"c%d","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":%d},"_meta":{"progressToken":"p"},"task":{}}}`, i, steps)
					created, _ := until(fmt.Sprintf("c%d", i), "")
					var ct struct {
						Result struct {
							Task struct{ TaskID string } `json:"task"`
						} `json:"result"`
					}
					if err := json.Unmarshal(created, &ct); err != nil || ct.Result.Task.TaskID == "" {
						b.Fatalf("no task: %s", created)
					}
					write(`{"jsonrpc":"2.0","id":"s%d","method":"tasks/stream","params":{"taskId":%q}}`, i, ct.Result.Task.TaskID)
					if _, n := until(fmt.Sprintf("s%d", i), spec.MethodTaskEvent); n != steps+1 {
						b.Fatalf("%d events, want %d", n, steps+1)
					}
					streamed += time.Since(t0)
					t0 = time.Now()
					write(`{"jsonrpc":"2.0","id":"p%d","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":%d},"_meta":{"progressToken":"q"}}}`, i, steps)
					if _, n := until(fmt.Sprintf("p%d", i), spec.MethodProgress); n != steps {
						b.Fatalf("%d progress notifications, want %d", n, steps)
					}
					called += time.Since(t0)
				}
				iters := float64(b.N)
				b.ReportMetric(iters*steps/streamed.Seconds(), "events/s")
				b.ReportMetric(iters*steps/called.Seconds(), "call-progress/s")
				b.ReportMetric(called.Seconds()/streamed.Seconds(), "stream/call")
			})
			bs.Run("op=replay", func(b *testing.B) {
				const steps = 999 // and the status: 1,000 events
				// An engine of its own, which writes the task and, with
				// JetStream, closes before a second one reads it (a restart).
				var st resume.Store
				var nc *nats.Conn
				if store == "jetstream" {
					st, _, nc = jstest.Start(b, false)
				}
				writer, err := mcp.New(demo.Server("bench"), &mcp.Options{Store: st, Tools: demo.Policies(), Engine: &resume.Options{QueueBytes: 64 << 20}})
				if err != nil {
					b.Fatal(err)
				}
				w := e2etest.NewClient(b, serveCore(b, writer)(b))
				w.Initialize(`{}`)
				w.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":%d},"_meta":{"progressToken":"p"},"task":{}}}`, steps)
				m, _ := w.Response(`"c"`)
				var created struct {
					Task struct{ TaskID string } `json:"task"`
				}
				if err := json.Unmarshal(m.Result, &created); err != nil || created.Task.TaskID == "" {
					b.Fatalf("no task: %s", m.Raw)
				}
				task := created.Task.TaskID
				w.Send(`{"jsonrpc":"2.0","id":"w","method":"tasks/stream","params":{"taskId":%q}}`, task)
				w.Response(`"w"`)               // to its end
				conn := serveCore(b, writer)(b) // the reader: raw, so that the client's decoding is not measured
				if nc != nil {
					writer.Close()
					js, err := jetstream.New(nc)
					if err != nil {
						b.Fatal(err)
					}
					st2, err := jsstore.New(context.Background(), js, nil)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = st2.Close(context.Background()) })
					core2, err := mcp.New(demo.Server("bench"), &mcp.Options{Store: st2, Tools: demo.Policies()})
					if err != nil {
						b.Fatal(err)
					}
					conn = serveCore(b, core2)(b)
				}
				ctx := context.Background()
				if err := conn.Write(ctx, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)); err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Read(ctx); err != nil {
					b.Fatal(err)
				}
				var d []time.Duration
				i := 0
				for b.Loop() {
					i++
					t0 := time.Now()
					if err := conn.Write(ctx, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"r%d","method":"tasks/stream","params":{"taskId":%q}}`, i, task)); err != nil {
						b.Fatal(err)
					}
					events, end := 0, fmt.Appendf(nil, `"id":"r%d"`, i)
					for {
						msg, err := conn.Read(ctx)
						if err != nil {
							b.Fatal(err)
						}
						if bytes.Contains(msg, end) {
							break
						}
						events++
					}
					d = append(d, time.Since(t0))
					if events != steps+1 {
						b.Fatalf("%d events, want %d", events, steps+1)
					}
				}
				reportP50(b, d)
			})
		})
	}
}

// BenchmarkCoreTracingPaired is BenchmarkCoreToolsCallPaired's pairing for
// tracing: each iteration makes one echo call on a server without a
// TracerProvider (tracing off: no span, nothing read for one) and one on a
// server that samples every request and exports its span in batches (the
// SDK's batch processor, to an exporter that drops what it gets), both for a
// client with resumable requests (a span that the request keeps, and its
// trace context in the request's record). The "traced/off" metric is the
// ratio of their times per call.
func BenchmarkCoreTracingPaired(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	caps := `{"resumableRequests":{}}`
	off := benchCore(b, caps, nil)
	on := benchCore(b, caps, &mcp.Options{TracerProvider: tp})
	benchPaired(b, off, on, "traced")
}

// BenchmarkCoreAuditPaired measures what the audit trail adds to a call: the
// same resumable client's echo on a server without it and on one whose
// Options.Audit is an audit.Trail writing JSON lines to a file (the echo's
// arguments hashed by its rule), called alternately, as
// BenchmarkCoreTracingPaired does. The trail writes from a goroutine of its
// own: what the call pays is the event's making and its queueing, and the
// share of the two cores its writer takes.
func BenchmarkCoreAuditPaired(b *testing.B) {
	caps := `{"resumableRequests":{}}`
	off := benchCore(b, caps, nil)
	on := benchCore(b, caps, benchAudit(b, &mcp.Options{}))
	benchPaired(b, off, on, "audited")
}

// BenchmarkCoreLimitsPaired is issue 60's benchmark: a resumable client's
// echo through the core with five policies in effect (benchPolicies: echo's
// own has a Timeout, a Rate it never spends and a Concurrency bound it never
// reaches, so that every call goes through each limit's path), with and
// without an audit file (the echo's arguments hashed), against the same echo
// on a server with neither, paired as BenchmarkCoreToolsCallPaired is. The
// "on/off" metric is the ratio.
func BenchmarkCoreLimitsPaired(b *testing.B) {
	caps := `{"resumableRequests":{}}`
	b.Run("policies", func(b *testing.B) {
		off := benchCore(b, caps, nil)
		on := benchCore(b, caps, benchPolicies())
		benchPaired(b, off, on, "on")
	})
	b.Run("policies+audit", func(b *testing.B) {
		off := benchCore(b, caps, nil)
		on := benchCore(b, caps, benchAudit(b, benchPolicies()))
		benchPaired(b, off, on, "on")
	})
}

// benchPolicies are five policies: the default, and four tools' with each of
// Policy's kinds of field. Echo's is Always, as the default of a server
// without policies is, so that its calls take the same resume path on both
// sides of a pairing; its limits never refuse.
func benchPolicies() *mcp.Options {
	return &mcp.Options{
		DefaultPolicy: mcp.Policy{Mode: mcp.After, After: time.Second, Timeout: time.Hour},
		Tools: map[string]mcp.Policy{
			"echo": {
				Mode:        mcp.Always,
				Timeout:     time.Minute,
				Rate:        mcp.Rate{Calls: 1 << 30, Per: time.Second},
				Concurrency: mcp.Concurrency{Max: 1 << 20, PerPrincipal: 1 << 20},
			},
			"countdown": {Mode: mcp.Always, Restartable: true, Timeout: 10 * time.Minute,
				Concurrency: mcp.Concurrency{Max: 4, PerPrincipal: 2, Queue: 8, Wait: 5 * time.Second}},
			"ask":       {Mode: mcp.After, After: 100 * time.Millisecond, Rate: mcp.Rate{Calls: 10, Per: time.Minute}},
			"summarize": {Mode: mcp.Never, Timeout: 30 * time.Second, Rate: mcp.Rate{Calls: 100, Per: time.Hour}},
		},
	}
}

// benchAudit sets opts' audit trail: JSON lines to a file in b's TempDir,
// echo's arguments hashed. The trail is closed when b ends, after the servers
// (cleanups run last first), and says what it dropped.
func benchAudit(b *testing.B, opts *mcp.Options) *mcp.Options {
	file, err := audit.OpenFile(filepath.Join(b.TempDir(), "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	trail := audit.NewTrail(nil, file)
	b.Cleanup(func() {
		_ = trail.Close()
		if n := trail.Dropped(); n > 0 {
			b.Logf("%d events dropped", n)
		}
	})
	opts.Audit = trail.Record
	if opts.Tools == nil {
		opts.Tools = map[string]mcp.Policy{}
	}
	echo := opts.Tools["echo"]
	echo.Arguments = audit.RuleHash
	opts.Tools["echo"] = echo
	return opts
}

// benchPaired makes b.N calls on each of off and on, one of each an
// iteration in alternating order, timing each, and reports their times per
// call ("off-ns/call", name+"-ns/call") and their ratio (name+"/off").
func benchPaired(b *testing.B, off, on func(int), name string) {
	var offT, onT time.Duration
	timed := func(call func(int), i int) time.Duration {
		t := time.Now()
		call(i)
		return time.Since(t)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if n%2 == 0 {
			offT += timed(off, n)
			onT += timed(on, n)
		} else {
			onT += timed(on, n)
			offT += timed(off, n)
		}
	}
	b.ReportMetric(float64(offT.Nanoseconds())/float64(n), "off-ns/call")
	b.ReportMetric(float64(onT.Nanoseconds())/float64(n), name+"-ns/call")
	b.ReportMetric(float64(onT)/float64(offT), name+"/off")
}
