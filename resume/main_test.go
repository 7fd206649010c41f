package resume_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// errSinkClosed is what a failing testSink returns.
var errSinkClosed = errors.New("test sink: connection lost")

// testSink records the messages written to it and can be made to fail: it accepts
// limit writes, then fails every later one (a dropped connection). It is safe for
// concurrent use.
type testSink struct {
	mu     sync.Mutex // guards the fields below
	msgs   [][]byte
	limit  int // writes accepted before failing; < 0 means never fail
	failed int
}

var _ resume.Sink = (*testSink)(nil)

func newSink() *testSink { return &testSink{limit: -1} }

// failingSink accepts n writes, then fails.
func failingSink(n int) *testSink { return &testSink{limit: n} }

func (s *testSink) Write(_ context.Context, m resume.Message) error {
	msg := m.Data
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit >= 0 && len(s.msgs) >= s.limit {
		s.failed++
		return errSinkClosed
	}
	s.msgs = append(s.msgs, bytes.Clone(msg))
	return nil
}

func (s *testSink) failures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// received returns the messages written so far, decoded.
func (s *testSink) received(t testing.TB) []wireMsg {
	t.Helper()
	s.mu.Lock()
	raw := slices.Clone(s.msgs)
	s.mu.Unlock()
	out := make([]wireMsg, 0, len(raw))
	for _, b := range raw {
		out = append(out, decode(t, b))
	}
	return out
}

// seqs returns the sequence numbers of the messages written so far, in write order.
func (s *testSink) seqs(t testing.TB) []uint64 {
	t.Helper()
	var out []uint64
	for _, m := range s.received(t) {
		out = append(out, m.seq)
	}
	return out
}

// top returns the seq of the last message written, or 0.
func (s *testSink) top(t testing.TB) uint64 {
	t.Helper()
	s.mu.Lock()
	var last []byte
	if len(s.msgs) > 0 {
		last = s.msgs[len(s.msgs)-1]
	}
	s.mu.Unlock()
	if last == nil {
		return 0
	}
	return decode(t, last).seq
}

// wireMsg is what a test reads back from a written message.
type wireMsg struct {
	kind string
	key  string
	seq  uint64
}

// encoder returns the encode function of a message of the given kind (its name goes
// into the method) and progress key, shaped like an MCP message carrying its seq.
func encoder(kind, key string) func(seq uint64) []byte {
	return func(seq uint64) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"test/%s","params":{"_meta":{"io.mcp-resume/seq":%d},"progressToken":%q,"pad":"....................................."}}`, kind, seq, key)
	}
}

func decode(t testing.TB, b []byte) wireMsg {
	t.Helper()
	var v struct {
		Method string `json:"method"`
		Params struct {
			Meta struct {
				Seq uint64 `json:"io.mcp-resume/seq"`
			} `json:"_meta"`
			Key string `json:"progressToken"`
		} `json:"params"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding written message %q: %v", b, err)
	}
	kind, ok := bytes.CutPrefix([]byte(v.Method), []byte("test/"))
	if !ok || v.Params.Meta.Seq == 0 {
		t.Fatalf("written message %q: no kind or seq", b)
	}
	return wireMsg{kind: string(kind), key: v.Params.Key, seq: v.Params.Meta.Seq}
}

var kindNames = map[resume.Kind]string{
	resume.KindNotification: "notification",
	resume.KindProgress:     "progress",
	resume.KindRequest:      "request",
	resume.KindResponse:     "response",
}

// appendMsg appends a message of kind k and returns its seq.
func appendMsg(t testing.TB, r *resume.Request, k resume.Kind, key string) uint64 {
	t.Helper()
	seq, err := r.Append(k, key, encoder(kindNames[k], key))
	if err != nil {
		t.Fatalf("Append(%s): %v", kindNames[k], err)
	}
	return seq
}

func complete(t testing.TB, r *resume.Request) uint64 {
	t.Helper()
	seq, err := r.Complete(false, encoder("response", ""))
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	return seq
}

// mustNew returns resume.New(t.Context(), st, opts), failing t on an error.
// The caller closes the engine.
func mustNew(t testing.TB, st resume.Store, opts *resume.Options) *resume.Engine {
	t.Helper()
	e, err := resume.New(t.Context(), st, opts)
	if err != nil {
		t.Fatalf("resume.New: %v", err)
	}
	return e
}

// withoutStore makes newEngine start engines without a Store (TestWithoutStore).
var withoutStore bool

// newEngine returns an engine over a fresh memstore, closed when the test ends; with
// withoutStore, an engine without a store (and no memstore).
func newEngine(t testing.TB, opts *resume.Options) (*resume.Engine, *memstore.Store) {
	t.Helper()
	if withoutStore {
		e := mustNew(t, nil, opts)
		t.Cleanup(e.Close)
		return e, nil
	}
	st := memstore.New()
	e := mustNew(t, st, opts)
	t.Cleanup(e.Close)
	return e, st
}

func start(t testing.TB, e *resume.Engine, id string, so *resume.StartOptions) (*resume.Request, string) {
	t.Helper()
	r, tok, err := e.Start([]byte(id), so)
	if err != nil {
		t.Fatalf("Start(%s): %v", id, err)
	}
	return r, tok
}

func attach(t testing.TB, r resume.Handle, s resume.Sink, ack uint64) {
	t.Helper()
	if err := r.Attach(s, ack); err != nil {
		t.Fatalf("Attach(ack=%d): %v", ack, err)
	}
}

func wantSeqs(t testing.TB, what string, got []uint64, want ...uint64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got seqs %v, want %v", what, got, want)
	}
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

// wantCause checks that ctx is done with cause want.
func wantCause(t testing.TB, ctx context.Context, want error) {
	t.Helper()
	if ctx.Err() == nil {
		t.Fatalf("request context not done, want cause %v", want)
	}
	if got := context.Cause(ctx); !errors.Is(got, want) {
		t.Fatalf("request context cause %v, want %v", got, want)
	}
}

func wantAlive(t testing.TB, ctx context.Context) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("request context done (cause %v), want alive", context.Cause(ctx))
	}
}
