// Package conntest is the contract of transport.Conn as a test suite. Every Conn runs
// it: transport.Pipe in its own tests, stdio over OS pipes, and each later transport.
package conntest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/transport"
)

// failAfter bounds how long a test waits for something that must happen; reaching it
// fails the test (a Read or Write that never returns). It is never slept on.
const failAfter = 10 * time.Second

// Run runs the contract against connected pairs made by pair, one fresh pair per
// subtest: a message written on client is read on server, and the other way round.
// Run closes both ends when each subtest ends; pair may register its own cleanup.
// Messages are JSON objects without raw newlines or surrounding whitespace, up to
// 1 MiB, so pair's Conns must accept at least that size.
func Run(t *testing.T, pair func(t *testing.T) (client, server transport.Conn)) {
	newPair := func(t *testing.T) (client, server transport.Conn) {
		t.Helper()
		client, server = pair(t)
		t.Cleanup(func() {
			client.Close()
			server.Close()
		})
		return client, server
	}
	t.Run("OrderAndIntact", func(t *testing.T) {
		client, server := newPair(t)
		t.Run("ClientToServer", func(t *testing.T) { testOrder(t, client, server) })
		t.Run("ServerToClient", func(t *testing.T) { testOrder(t, server, client) })
	})
	for _, tc := range []struct {
		name string
		test func(t *testing.T, client, server transport.Conn)
	}{
		{"ConcurrentWrite", testConcurrentWrite},
		{"CloseUnblocksRead", testCloseUnblocksRead},
		{"PeerCloseUnblocksRead", testPeerCloseUnblocksRead},
		{"ReadAfterPeerClose", testReadAfterPeerClose},
		{"CloseTwice", testCloseTwice},
		{"AfterClose", testAfterClose},
		{"CloseUnblocksWrite", testCloseUnblocksWrite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := newPair(t)
			tc.test(t, client, server)
		})
	}
}

// message returns a JSON object of about size bytes that names n; its padding varies
// with n so that a message mixed up with another one does not compare equal.
func message(n, size int) []byte {
	head := fmt.Sprintf(`{"n":%d,"text":"é\"\\✓\u2028","pad":"`, n)
	pad := max(size-len(head)-2, 0)
	b := make([]byte, 0, len(head)+pad+2)
	b = append(b, head...)
	for i := range pad {
		b = append(b, 'a'+byte((n+i)%26))
	}
	return append(b, `"}`...)
}

// sizes are the message sizes the order test sends: around the usual buffer sizes.
var sizes = []int{2, 1, 100, 4095, 4096, 4097, 65535, 65536, 65537, 200_000, 1 << 20, 10}

// result is what a goroutine reports back to the test.
type result struct {
	msg []byte
	err error
}

// await returns the value ch delivers, or fails the test after failAfter.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(failAfter)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing after %v", what, failAfter)
		var zero T
		return zero
	}
}

// readAsync reads one message in a goroutine.
func readAsync(ctx context.Context, c transport.Conn) <-chan result {
	ch := make(chan result, 1)
	go func() {
		m, err := c.Read(ctx)
		ch <- result{m, err}
	}()
	return ch
}

// writeAll writes msgs in a goroutine from a single buffer it overwrites after every
// Write, so a Conn that keeps the caller's slice is caught. The channel delivers the
// first error, or nil.
func writeAll(ctx context.Context, c transport.Conn, msgs [][]byte) <-chan error {
	ch := make(chan error, 1)
	go func() {
		var buf []byte
		for i, m := range msgs {
			buf = append(buf[:0], m...)
			if err := c.Write(ctx, buf); err != nil {
				ch <- fmt.Errorf("write of message %d: %w", i, err)
				return
			}
			clear(buf)
		}
		ch <- nil
	}()
	return ch
}

func testOrder(t *testing.T, from, to transport.Conn) {
	ctx := t.Context()
	var msgs [][]byte
	for i, size := range sizes {
		msgs = append(msgs, message(i, size))
	}
	msgs[0] = []byte(`{}`)
	msgs[1] = []byte(`1`) // the smallest JSON-RPC-shaped value still a message
	written := writeAll(ctx, from, msgs)
	// Keep every message read until the end: a Conn that reuses the returned slice
	// would change an earlier message.
	var got [][]byte
	for i := range msgs {
		r := await(t, readAsync(ctx, to), fmt.Sprintf("Read of message %d", i))
		if r.err != nil {
			t.Fatalf("Read of message %d: %v", i, r.err)
		}
		got = append(got, r.msg)
	}
	if err := await(t, written, "writer"); err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		if !bytes.Equal(got[i], msgs[i]) {
			t.Errorf("message %d: read %d bytes %.60q..., want %d bytes %.60q...", i, len(got[i]), got[i], len(msgs[i]), msgs[i])
		}
	}
}

func testConcurrentWrite(t *testing.T, client, server transport.Conn) {
	const writers, each = 8, 40
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				// Sizes vary across buffer boundaries so interleaved writes would show.
				size := 50 + (w*7919+i*104729)%20000
				m := message(w*1000+i, size)
				if err := client.Write(ctx, m); err != nil {
					errs <- fmt.Errorf("writer %d, message %d: %w", w, i, err)
					return
				}
			}
		})
	}
	next := make([]int, writers) // the next i expected from each writer
	for k := range writers * each {
		r := await(t, readAsync(ctx, server), fmt.Sprintf("Read %d of %d", k, writers*each))
		if r.err != nil {
			t.Fatalf("Read %d: %v", k, r.err)
		}
		var v struct {
			N int `json:"n"`
		}
		if err := json.Unmarshal(r.msg, &v); err != nil {
			t.Fatalf("Read %d: not one message (interleaved writes?): %v: %.80q", k, err, r.msg)
		}
		w, i := v.N/1000, v.N%1000
		if w < 0 || w >= writers || i != next[w] {
			t.Fatalf("Read %d: message %d of writer %d, want message %d of it", k, i, w, next[w])
		}
		if want := message(v.N, 50+(w*7919+i*104729)%20000); !bytes.Equal(r.msg, want) {
			t.Fatalf("Read %d: message %d of writer %d is not intact", k, i, w)
		}
		next[w]++
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// readTwice reads two messages from c on a goroutine of its own, each result on
// its channel.
func readTwice(ctx context.Context, c transport.Conn) (first, second <-chan result) {
	f, sec := make(chan result, 1), make(chan result, 1)
	go func() {
		m, err := c.Read(ctx)
		f <- result{m, err}
		m, err = c.Read(ctx)
		sec <- result{m, err}
	}()
	return f, sec
}

func testCloseUnblocksRead(t *testing.T, client, server transport.Conn) {
	ctx := t.Context()
	if err := client.Write(ctx, []byte(`{"first":true}`)); err != nil {
		t.Fatal(err)
	}
	// The reader gets one message, then blocks in the next Read (or, if Close wins the
	// race, starts it on a closed Conn: it must fail either way).
	first, second := readTwice(ctx, server)
	if r := await(t, first, "first Read"); r.err != nil || string(r.msg) != `{"first":true}` {
		t.Fatalf("first Read = %q, %v", r.msg, r.err)
	}
	if err := server.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := await(t, second, "Read blocked during Close"); r.err == nil {
		t.Fatalf("Read blocked during Close returned message %q, want an error", r.msg)
	}
}

func testPeerCloseUnblocksRead(t *testing.T, client, server transport.Conn) {
	ctx := t.Context()
	if err := client.Write(ctx, []byte(`{"first":true}`)); err != nil {
		t.Fatal(err)
	}
	first, second := readTwice(ctx, server)
	if r := await(t, first, "first Read"); r.err != nil {
		t.Fatalf("first Read: %v", r.err)
	}
	if err := client.Close(); err != nil {
		t.Fatalf("peer Close: %v", err)
	}
	if r := await(t, second, "Read blocked during the peer's Close"); !errors.Is(r.err, io.EOF) {
		t.Fatalf("Read blocked during the peer's Close = %q, %v; want io.EOF", r.msg, r.err)
	}
}

func testReadAfterPeerClose(t *testing.T, client, server transport.Conn) {
	ctx := t.Context()
	msgs := [][]byte{message(1, 10), message(2, 5000), message(3, 20)}
	if err := await(t, writeAll(ctx, client, msgs), "writes"); err != nil {
		t.Fatal(err)
	}
	if err := client.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// What was written before Close is still delivered, then the end.
	for i, want := range msgs {
		r := await(t, readAsync(ctx, server), "Read after the peer closed")
		if r.err != nil || !bytes.Equal(r.msg, want) {
			t.Fatalf("Read %d after the peer closed = %.40q, %v; want %.40q", i, r.msg, r.err, want)
		}
	}
	for i := range 2 {
		r := await(t, readAsync(ctx, server), "Read at the end")
		if !errors.Is(r.err, io.EOF) {
			t.Fatalf("Read %d past the end = %q, %v; want io.EOF", i, r.msg, r.err)
		}
	}
}

func testCloseTwice(t *testing.T, client, server transport.Conn) {
	if err := server.Close(); err != nil {
		t.Errorf("first Close: %v", err)
	}
	if err := server.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// Concurrently too: the race detector watches.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { client.Close() })
	}
	wg.Wait()
	if err := client.Close(); err != nil {
		t.Errorf("Close after concurrent Closes: %v", err)
	}
}

func testAfterClose(t *testing.T, client, server transport.Conn) {
	ctx := t.Context()
	if err := client.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := client.Write(ctx, []byte(`{}`)); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Write after Close: %v, want transport.ErrClosed", err)
	}
	if r := await(t, readAsync(ctx, client), "Read after Close"); r.err == nil {
		t.Errorf("Read after Close = %q, want an error", r.msg)
	}
}

func testCloseUnblocksWrite(t *testing.T, client, server transport.Conn) {
	ctx := t.Context()
	// Nobody reads server: the writer fills every buffer on the way and blocks.
	big := []byte(`{"pad":"` + strings.Repeat("x", 16<<10) + `"}`)
	wrote := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		for {
			if err := client.Write(ctx, big); err != nil {
				done <- err
				return
			}
			select {
			case wrote <- struct{}{}:
			default:
			}
		}
	}()
	await(t, wrote, "first Write")
	if err := client.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := await(t, done, "Write blocked during Close"); err == nil {
		t.Fatal("unreachable: the writer stops only on an error")
	}
}
