package stdio_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/conntest"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// osPipePair returns stdio Conns over two OS pipes: the client writes into the
// server's stdin and reads its stdout, as a client does with a child process.
func osPipePair(t *testing.T) (transport.Conn, transport.Conn) {
	t.Helper()
	serverIn, clientOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	clientIn, serverOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range []*os.File{serverIn, clientOut, clientIn, serverOut} {
			f.Close() // most are closed by the Conns already
		}
	})
	return stdio.New(clientIn, clientOut, nil), stdio.New(serverIn, serverOut, nil)
}

func TestConnContract(t *testing.T) {
	conntest.Run(t, osPipePair)
}

// read is what one Read returned.
type read struct {
	msg string
	err error
}

// readAll reads input through a Conn with the given limit until io.EOF (included).
func readAll(t *testing.T, input string, limit int) []read {
	t.Helper()
	c := stdio.New(strings.NewReader(input), io.Discard, &stdio.Options{MaxMessageBytes: limit})
	defer c.Close()
	var out []read
	for range 1000 {
		m, err := c.Read(t.Context())
		out = append(out, read{string(m), err})
		if errors.Is(err, io.EOF) {
			return out
		}
	}
	t.Fatalf("no io.EOF after 1000 Reads of %.60q", input)
	return nil
}

// errTooLarge stands for a *transport.TooLargeError in a want list.
var errTooLarge = errors.New("too large")

func checkReads(t *testing.T, got []read, want []read, limit int) {
	t.Helper()
	short := func(s string) string {
		if len(s) > 40 {
			return s[:20] + "..." + s[len(s)-20:]
		}
		return s
	}
	if len(got) != len(want) {
		var gs []string
		for _, r := range got {
			gs = append(gs, short(r.msg)+"/"+errString(r.err))
		}
		t.Fatalf("got %d reads %q, want %d", len(got), gs, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		switch {
		case errors.Is(w.err, errTooLarge):
			var tl *transport.TooLargeError
			if !errors.As(g.err, &tl) || tl.Limit != limit {
				t.Errorf("read %d = %q, %v; want *transport.TooLargeError{Limit: %d}", i, short(g.msg), g.err, limit)
			}
		case !errors.Is(g.err, w.err) || g.msg != w.msg:
			t.Errorf("read %d = %q, %v; want %q, %v", i, short(g.msg), g.err, short(w.msg), w.err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func TestReadLines(t *testing.T) {
	const limit = 16
	at := `{"a":"` + strings.Repeat("x", limit-8) + `"}` // exactly limit bytes
	over := `{"a":"` + strings.Repeat("x", limit-7) + `"}`
	if len(at) != limit || len(over) != limit+1 {
		t.Fatalf("bad fixture lengths %d, %d", len(at), len(over))
	}
	eof := read{err: io.EOF}
	tests := []struct {
		name  string
		input string
		want  []read
	}{
		{"one message", "{}\n", []read{{msg: "{}"}, eof}},
		{"empty input", "", []read{eof}},
		{"empty lines skipped", "\n\n  \n{}\n\r\n\t\n{\"a\":1}\n\n", []read{{msg: "{}"}, {msg: `{"a":1}`}, eof}},
		{"only empty lines", "\n\r\n \n", []read{eof}},
		{"last message without newline", "{}\n{\"b\":2}", []read{{msg: "{}"}, {msg: `{"b":2}`}, eof}},
		{"only message without newline", `{"b":2}`, []read{{msg: `{"b":2}`}, eof}},
		{"CRLF line endings", "{\"a\":1}\r\n{\"b\":2}\r\n", []read{{msg: `{"a":1}`}, {msg: `{"b":2}`}, eof}},
		{"CRLF without a final newline", "{\"a\":1}\r\n{\"b\":2}", []read{{msg: `{"a":1}`}, {msg: `{"b":2}`}, eof}},
		{"surrounding blanks trimmed", "  {\"a\":1}\t \n", []read{{msg: `{"a":1}`}, eof}},
		{"line at the limit", at + "\n", []read{{msg: at}, eof}},
		{"line at the limit without newline", at, []read{{msg: at}, eof}},
		{"line over the limit, then the next one", over + "\n{}\n", []read{{err: errTooLarge}, {msg: "{}"}, eof}},
		{"line over the limit, last", "{}\n" + over + "\n", []read{{msg: "{}"}, {err: errTooLarge}, eof}},
		{"two lines over the limit", over + "\n" + over + "\n" + at + "\n", []read{{err: errTooLarge}, {err: errTooLarge}, {msg: at}, eof}},
		{"long line over the limit without newline", "{}\n" + over + over, []read{{msg: "{}"}, {err: errTooLarge}, eof}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkReads(t, readAll(t, tt.input, limit), tt.want, limit)
		})
	}
}

// Lines longer than the reader's 64 KiB buffer: the limit is counted across chunks.
func TestReadLongLines(t *testing.T) {
	const limit = 200_000
	line := func(n int) string { return `"` + strings.Repeat("y", n-2) + `"` }
	at, over, huge := line(limit), line(limit+1), line(3*limit)
	eof := read{err: io.EOF}
	checkReads(t, readAll(t, at+"\n"+over+"\n"+huge+"\n{}\n"+at, limit),
		[]read{{msg: at}, {err: errTooLarge}, {err: errTooLarge}, {msg: "{}"}, {msg: at}, eof}, limit)
}

// Without Options, the limit is transport.DefaultMaxMessageBytes.
func TestDefaultLimit(t *testing.T) {
	limit := transport.DefaultMaxMessageBytes
	at := strings.Repeat("1", limit)
	over := strings.Repeat("1", limit+1)
	for _, opts := range []*stdio.Options{nil, {}, {MaxMessageBytes: -1}} {
		c := stdio.New(strings.NewReader(at+"\n"+over+"\n{}\n"), io.Discard, opts)
		if m, err := c.Read(t.Context()); err != nil || len(m) != limit {
			t.Fatalf("Read of a %d-byte line: %d bytes, %v", limit, len(m), err)
		}
		var tl *transport.TooLargeError
		if _, err := c.Read(t.Context()); !errors.As(err, &tl) || tl.Limit != limit {
			t.Fatalf("Read of a %d-byte line: %v, want *transport.TooLargeError{Limit: %d}", limit+1, err, limit)
		}
		if m, err := c.Read(t.Context()); err != nil || string(m) != "{}" {
			t.Fatalf("Read after a line too large = %q, %v", m, err)
		}
		c.Close()
	}
}

// Known defects of the line reader.
func TestReadLastLine(t *testing.T) {
	const limit = 16
	over := `{"a":"` + strings.Repeat("x", limit-7) + `"}` // limit+1 bytes
	eof := read{err: io.EOF}
	t.Run("last line over the limit without newline", func(t *testing.T) {
		checkReads(t, readAll(t, "{}\n"+over, limit), []read{{msg: "{}"}, {err: errTooLarge}, eof}, limit)
	})
	t.Run("blank last line without newline", func(t *testing.T) {
		checkReads(t, readAll(t, "{}\n  ", limit), []read{{msg: "{}"}, eof}, limit)
		checkReads(t, readAll(t, "{}\n{\"a\":1}  ", limit), []read{{msg: "{}"}, {msg: `{"a":1}`}, eof}, limit)
	})
}

func TestWrite(t *testing.T) {
	var out bytes.Buffer
	c := stdio.New(strings.NewReader(""), &out, nil)
	for _, m := range []string{`{"a":1}`, `{}`, `"é✓"`} {
		if err := c.Write(t.Context(), []byte(m)); err != nil {
			t.Fatalf("Write(%s): %v", m, err)
		}
	}
	if got, want := out.String(), "{\"a\":1}\n{}\n\"é✓\"\n"; got != want {
		t.Fatalf("written %q, want %q", got, want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(t.Context(), []byte(`{}`)); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Write after Close: %v, want transport.ErrClosed", err)
	}
	if _, err := c.Read(t.Context()); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Read after Close: %v, want transport.ErrClosed", err)
	}
}

// A Write error from the writer is returned.
func TestWriteError(t *testing.T) {
	boom := errors.New("disk full")
	c := stdio.New(strings.NewReader(""), errWriter{boom}, nil)
	if err := c.Write(t.Context(), []byte(`{}`)); !errors.Is(err, boom) {
		t.Fatalf("Write to a failing writer: %v, want %v", err, boom)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

// closeCounter is a reader and writer that counts its Close calls.
type closeCounter struct {
	io.Reader
	io.Writer
	closes *atomic.Int32
	err    error
}

func (c *closeCounter) Close() error { c.closes.Add(1); return c.err }

// Close closes the reader and the writer once each, and one object used as both once.
func TestCloseClosesOnce(t *testing.T) {
	var n atomic.Int32
	rw := &closeCounter{Reader: strings.NewReader(""), Writer: io.Discard, closes: &n}
	c := stdio.New(rw, rw, nil)
	c.Close()
	c.Close()
	if got := n.Load(); got != 1 {
		t.Errorf("one ReadWriteCloser for both: %d Close calls, want 1", got)
	}

	var rn, wn atomic.Int32
	r := &closeCounter{Reader: strings.NewReader(""), closes: &rn}
	w := &closeCounter{Writer: io.Discard, closes: &wn}
	c = stdio.New(r, w, nil)
	c.Close()
	c.Close()
	if rn.Load() != 1 || wn.Load() != 1 {
		t.Errorf("reader and writer: %d and %d Close calls, want 1 each", rn.Load(), wn.Load())
	}
}

// Close reports the errors of closing the reader and the writer, the first time.
func TestCloseError(t *testing.T) {
	boom := errors.New("close failed")
	var n atomic.Int32
	c := stdio.New(&closeCounter{Reader: strings.NewReader(""), closes: &n, err: boom}, io.Discard, nil)
	if err := c.Close(); !errors.Is(err, boom) {
		t.Errorf("Close: %v, want %v", err, boom)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
}

// Drain waits until the reader of the pipe or socket has taken what was written:
// at once when nothing is unread, until its bound when nobody reads, and until the
// reader has read everything otherwise. A child's stdout is a pipe from a shell,
// and a Unix socket from Node (which the TypeScript SDK spawns servers with).
func TestDrain(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Drain sees the unread bytes on Linux only")
	}
	t.Run("pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		testDrain(t, r, w)
	})
	t.Run("socket", func(t *testing.T) {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		testDrain(t, os.NewFile(uintptr(fds[0]), "reader"), os.NewFile(uintptr(fds[1]), "writer"))
	})
}

func testDrain(t *testing.T, r, w *os.File) {
	defer r.Close()
	c := stdio.New(strings.NewReader(""), w, nil)
	defer c.Close()
	ctx := t.Context()
	c.Drain(ctx, time.Hour) // nothing written: returns at once

	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/progress"}`)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Drain(ctx, 20*time.Millisecond) // nobody reads: bounded
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("Drain returned after %v with the message unread", d)
	}
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- line
	}()
	c.Drain(ctx, time.Hour) // returns once the reader has it all
	if line := <-got; !strings.Contains(line, "notifications/progress") {
		t.Errorf("the reader got %q", line)
	}
}

// A message with newlines between its tokens (an indented one, passed on) is
// written compact, on one line; one with a newline that is not JSON is an
// error, and nothing is written.
func TestWriteCompacts(t *testing.T) {
	var out bytes.Buffer
	c := stdio.New(strings.NewReader(""), &out, nil)
	if err := c.Write(context.Background(), []byte("{\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"x\"\n}")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != `{"jsonrpc":"2.0","method":"x"}`+"\n" {
		t.Fatalf("written %q", got)
	}
	out.Reset()
	if err := c.Write(context.Background(), []byte("not\njson")); err == nil || out.Len() != 0 {
		t.Fatalf("a raw newline: %v, wrote %q", err, out.String())
	}
}
