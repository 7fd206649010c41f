package transport_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/conntest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPipe(t *testing.T) {
	conntest.Run(t, func(*testing.T) (transport.Conn, transport.Conn) { return transport.Pipe() })
}

// Write copies the message: the caller may reuse its buffer at once.
func TestPipeWriteCopies(t *testing.T) {
	a, b := transport.Pipe()
	defer a.Close()
	buf := []byte(`{"a":1}`)
	if err := a.Write(t.Context(), buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, `{"b":2}`)
	got, err := b.Read(t.Context())
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("Read = %s, %v; want {\"a\":1}", got, err)
	}
}

// Read and a Write on a full buffer return when their context ends.
func TestPipeContext(t *testing.T) {
	a, b := transport.Pipe()
	defer a.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled context: %v, want context.Canceled", err)
	}
	for i := range 1024 { // fill the buffer
		if err := a.Write(t.Context(), []byte(`{}`)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	if err := a.Write(ctx, []byte(`{}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("Write on a full buffer with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestTooLargeError(t *testing.T) {
	var err error = &transport.TooLargeError{Limit: 10}
	var tl *transport.TooLargeError
	if !errors.As(errors.Join(errors.New("reading"), err), &tl) || tl.Limit != 10 {
		t.Fatalf("errors.As did not find the *TooLargeError")
	}
	if got, want := err.Error(), "transport: message larger than 10 bytes"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
