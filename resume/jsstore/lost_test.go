package jsstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// TestStoreLost: NATS restarts on an empty directory, so the stream and the
// bucket are gone. Nothing hangs: the store finds them gone, makes them anew,
// and each request it held ends failed with Options.Ended's response for
// resume.ErrStoreLost: one running and appending (its handler's context ends
// with that cause), one detached and quiet, resumed later, and one completed
// whose result was kept. A request started after that is stored as usual.
func TestStoreLost(t *testing.T) {
	dir := t.TempDir()
	srv := listen(t, dir)
	nc, js := dialNATS(t, "nats://"+srv.addr, 0)
	var logs logbuf.Buffer
	log := zerolog.New(&logs)
	st, err := openStore(t, js, &jsstore.Options{Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background()) // after the engine: nothing left in flight
	ended := func(id []byte, seq uint64, cause error) []byte {
		return fmt.Appendf(nil, `{"id":%s,"seq":%d,"ended":%q}`, id, seq, cause)
	}
	e := mustNew(t, st, &resume.Options{Logger: &log, Ended: ended})
	defer e.Close()

	start := func(id string) *resume.Request {
		r, _, err := e.Start([]byte(id), &resume.StartOptions{AckMode: true})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := r.Append(resume.KindProgress, "p", encodeAs(id, "progress")); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	running, quiet, done := start(`"running"`), start(`"quiet"`), start(`"done"`)
	if _, err := done.Complete(false, encodeAs(`"done"`, "result")); err != nil {
		t.Fatal(err)
	}

	srv.stop()
	waitFor(t, "the client to lose NATS", func() bool { return nc.Status() != nats.CONNECTED })
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if en.Name() != "lock" && !strings.HasSuffix(en.Name(), ".lock") {
			if err := os.RemoveAll(dir + "/" + en.Name()); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv.start()
	waitFor(t, "the client to reconnect", func() bool { return nc.Status() == nats.CONNECTED })

	// The running request appends on: it ends failed, with the reason.
	var appendErr error
	poll.Until(t, 30*time.Second, "an Append of the running request to fail with ErrStoreLost", func() bool {
		_, appendErr = running.Append(resume.KindProgress, "p", encodeAs(`"running"`, "progress"))
		return appendErr != nil
	})
	if !errors.Is(appendErr, resume.ErrStoreLost) && !errors.Is(appendErr, resume.ErrEnded) {
		t.Fatalf("the running request's Append: %v, want ErrStoreLost", appendErr)
	}
	if cause := context.Cause(running.Context()); !errors.Is(cause, resume.ErrStoreLost) {
		t.Errorf("the running request's context: cause %v, want ErrStoreLost", cause)
	}
	for _, c := range []struct {
		name string
		r    *resume.Request
	}{{"running", running}, {"quiet", quiet}, {"done", done}} {
		out := &sink{}
		if err := c.r.Attach(out, 0); err != nil {
			t.Fatalf("%s: Attach: %v", c.name, err)
		}
		poll.Until(t, 30*time.Second, c.name+": a response", func() bool { return len(out.got()) > 0 })
		got := out.got()
		last := got[len(got)-1]
		if len(got) != 1 || last.Kind != resume.KindResponse || !strings.Contains(string(last.Data), resume.ErrStoreLost.Error()) || last.Seq <= 3 {
			t.Errorf("%s: resumed with %d messages, the last %d %s; want only the response for ErrStoreLost, numbered after the messages lost", c.name, len(got), last.Seq, last.Data)
		}
		if s := c.r.Status().State; s != resume.StateFailed {
			t.Errorf("%s: state %s, want failed", c.name, s)
		}
		if err := c.r.Touch(last.Seq); err != nil || !c.r.Gone() {
			t.Errorf("%s: ack of its response: %v, gone %v", c.name, err, c.r.Gone())
		}
	}

	// Once the store has made them anew, a new request is stored as usual.
	poll.Until(t, 10*time.Second, "the store to make its stream and bucket anew", func() bool { return strings.Contains(logs.String(), "made anew") })
	fresh := start(`"fresh"`)
	final, err := fresh.Complete(false, encodeAs(`"fresh"`, "result"))
	if err != nil {
		t.Fatal(err)
	}
	out := &sink{}
	if err := fresh.Attach(out, 0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the new request's messages", func() bool { return len(out.got()) == 4 })
	if got := out.got(); got[3].Seq != final || got[3].Kind != resume.KindResponse {
		t.Errorf("the new request: %d messages, the last %d", len(got), got[3].Seq)
	}
	if err := fresh.Touch(final); err != nil {
		t.Fatal(err)
	}
	if msgs, keys := usage(t, js, jsstore.Options{}); msgs != 0 || keys != 0 {
		t.Errorf("after every request ended: %d stream messages, %d bucket messages left", msgs, keys)
	}
}
