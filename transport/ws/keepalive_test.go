package ws_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// pipeWriter is an http.ResponseWriter over one end of a net.Pipe that can be
// hijacked, so that a Handler serves a handshake inside a synctest bubble, where
// the clock is virtual.
type pipeWriter struct {
	conn   net.Conn
	brw    *bufio.ReadWriter
	header http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) Write(b []byte) (int, error) { return w.brw.Write(b) }

func (w *pipeWriter) WriteHeader(status int) {
	fmt.Fprintf(w.brw, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = w.header.Write(w.brw)
	w.brw.WriteString("\r\n")
	_ = w.brw.Flush()
}

func (w *pipeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.conn, w.brw, nil }

// rawPeer is the client end of a WebSocket written by hand: it writes masked
// frames and reads the server's, and answers pings only while told to.
type rawPeer struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader

	out    chan []byte // frames for the writer goroutine
	mu     sync.Mutex  // guards pong
	pong   bool
	msgs   chan string // text messages from the server
	pings  chan struct{}
	closed chan struct{} // the reader stopped
}

// handshake connects a rawPeer to h through a net.Pipe; serving ends on the
// returned channel.
func handshake(t *testing.T, h http.Handler) (*rawPeer, <-chan struct{}) {
	cli, srv := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		brw := bufio.NewReadWriter(bufio.NewReader(srv), bufio.NewWriter(srv))
		req, err := http.ReadRequest(brw.Reader)
		if err != nil {
			srv.Close()
			return
		}
		req.RemoteAddr = "pipe"
		h.ServeHTTP(&pipeWriter{conn: srv, brw: brw, header: http.Header{}}, req)
	}()
	p := &rawPeer{t: t, conn: cli, br: bufio.NewReader(cli), out: make(chan []byte, 1000), pong: true,
		msgs: make(chan string, 1000), pings: make(chan struct{}, 1000), closed: make(chan struct{})}
	fmt.Fprint(cli, "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n\r\n")
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	go p.read()
	go p.write()
	t.Cleanup(func() { close(p.out) })
	return p, served
}

// writeFrame queues one masked frame (mask key zero: the payload goes as is) for
// the writer goroutine: on an unbuffered pipe, a reader that wrote a pong itself
// could deadlock with a server writing to it.
func (p *rawPeer) writeFrame(op byte, payload []byte) {
	hdr := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	hdr = append(hdr, 0, 0, 0, 0)
	p.out <- append(hdr, payload...)
}

// write writes the queued frames until the queue is closed or a write fails.
func (p *rawPeer) write() {
	for f := range p.out {
		if _, err := p.conn.Write(f); err != nil {
			return
		}
	}
}

func (p *rawPeer) send(format string, args ...any) {
	p.t.Helper()
	p.writeFrame(0x1, fmt.Appendf(nil, format, args...))
}

// read reads the server's frames until the connection ends: text messages go to
// msgs, pings are answered with a pong while p.pong is set.
func (p *rawPeer) read() {
	defer close(p.closed)
	for {
		var h [2]byte
		if _, err := io.ReadFull(p.br, h[:]); err != nil {
			return
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(p.br, b[:]); err != nil {
				return
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(p.br, b[:]); err != nil {
				return
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(p.br, payload); err != nil {
			return
		}
		switch h[0] & 0x0f {
		case 0x1:
			p.msgs <- string(payload)
		case 0x9:
			p.pings <- struct{}{}
			p.mu.Lock()
			pong := p.pong
			p.mu.Unlock()
			if pong {
				p.writeFrame(0xA, payload)
			}
		}
	}
}

func (p *rawPeer) next() string {
	p.t.Helper()
	select {
	case m := <-p.msgs:
		return m
	case <-p.closed:
		p.t.Fatal("connection closed while waiting for a message")
		return ""
	}
}

func (p *rawPeer) setPong(on bool) {
	p.mu.Lock()
	p.pong = on
	p.mu.Unlock()
}

// A peer that stops answering pings (it still reads: a middlebox that swallows
// them, or a frozen client whose socket buffers still drain) is dropped within
// PingInterval + PingTimeout of virtual time, not before; its resumable request is
// detached, keeps running, and is resumed from a new connection. A peer that
// answers is never dropped.
func TestKeepaliveDropsSilentPeer(t *testing.T) {
	const interval, timeout = 10 * time.Second, 5 * time.Second
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := ws.NewHandler(core, &ws.AcceptOptions{Options: ws.Options{PingInterval: interval, PingTimeout: timeout}})
		p, served := handshake(t, h)

		p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"t","version":"1"}}}`)
		p.next()
		p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		// A two-minute call with a progress notification every second.
		p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":120,"steps":120},"_meta":{"progressToken":"p"}}}`)
		pol := e2etest.PolicyOf(t, decode(t, p.next()))

		// Alive for a minute: six pings answered, the connection stays.
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(p.pings); n != 6 {
			t.Fatalf("%d pings in a minute, want 6", n)
		}
		select {
		case <-served:
			t.Fatal("a peer that answers pings was dropped")
		default:
		}

		// Silent from now on.
		p.setPong(false)
		start := time.Now()
		<-served
		took := time.Since(start)
		if took > interval+timeout || took <= timeout {
			t.Fatalf("silent peer dropped after %v, want within (%v, %v]", took, timeout, interval+timeout)
		}
		<-p.closed
		if n := core.Engine().Live(); n != 1 {
			t.Fatalf("%d live requests after the drop, want 1 (detached)", n)
		}

		// A new connection resumes the call: the rest of its progress and the result.
		client, srv := transport.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = core.Serve(t.Context(), srv)
		}()
		c := e2etest.NewClient(t, client)
		c.Initialize(`{"resumableRequests":{}}`)
		if st, e := c.GetStatus(`"s"`, "1", pol.ResumeToken); e != nil || st.Status != "processing" {
			t.Fatalf("getStatus after the drop: %+v %v", st, e)
		}
		c.Resume(`1`, pol.ResumeToken)
		resp, _ := c.Response("1")
		if e2etest.Text(resp) != "countdown done: 120 of 120 steps" {
			t.Fatalf("resumed result %s", resp.Raw)
		}
		c.Close()
		<-done
		p.conn.Close()
		h.Close()
		core.Close()
	})
}

// The server pings only a quiet connection: while the peer's own frames keep
// coming (a message every 5 s, or its own pings), none for a minute; once it
// is quiet, one every PingInterval.
func TestKeepalivePingsOnlyQuiet(t *testing.T) {
	const interval, timeout = 10 * time.Second, 5 * time.Second
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := ws.NewHandler(core, &ws.AcceptOptions{Options: ws.Options{PingInterval: interval, PingTimeout: timeout}})
		p, served := handshake(t, h)
		p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		p.next()
		p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for i := 1; i <= 6; i++ {
			time.Sleep(5 * time.Second)
			p.send(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
			p.next()
		}
		for range 6 {
			time.Sleep(5 * time.Second)
			p.writeFrame(0x9, []byte("p"))
		}
		synctest.Wait()
		if n := len(p.pings); n != 0 {
			t.Fatalf("%d pings in a minute while the peer's frames came every 5 s, want none", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(p.pings); n != 6 {
			t.Fatalf("%d pings in a quiet minute, want 6", n)
		}
		p.conn.Close()
		<-served
		h.Close()
		core.Close()
	})
}

// A peer that stops reading altogether (a laptop asleep: nothing drains the
// socket) is dropped within the same bound: the ping cannot even be written.
func TestKeepaliveDropsFrozenPeer(t *testing.T) {
	const interval, timeout = 10 * time.Second, 5 * time.Second
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := ws.NewHandler(core, &ws.AcceptOptions{Options: ws.Options{PingInterval: interval, PingTimeout: timeout, WriteTimeout: time.Hour}})
		cli, srv := net.Pipe()
		served := make(chan struct{})
		go func() {
			defer close(served)
			brw := bufio.NewReadWriter(bufio.NewReader(srv), bufio.NewWriter(srv))
			req, err := http.ReadRequest(brw.Reader)
			if err != nil {
				return
			}
			h.ServeHTTP(&pipeWriter{conn: srv, brw: brw, header: http.Header{}}, req)
		}()
		p := &rawPeer{t: t, conn: cli, br: bufio.NewReader(cli), out: make(chan []byte, 10)}
		go p.write()
		defer close(p.out)
		fmt.Fprint(cli, "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n\r\n")
		if resp, err := http.ReadResponse(p.br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake: %v %v", resp, err)
		}
		// The call is sent, then the peer reads nothing more: the server's first
		// progress write blocks on the pipe.
		p.writeFrame(0x1, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		start := time.Now()
		<-served
		if took := time.Since(start); took > interval+timeout || took < interval {
			t.Fatalf("frozen peer dropped after %v, want within [%v, %v]", took, interval, interval+timeout)
		}
		cli.Close()
		h.Close()
		core.Close()
	})
}

func decode(t *testing.T, s string) e2etest.Msg {
	t.Helper()
	var m e2etest.Msg
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad message %q: %v", s, err)
	}
	m.Raw = []byte(s)
	return m
}
