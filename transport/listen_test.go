package transport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// Connections accepted by Listen carry the user timeout, with a limit or
// without.
func TestListenUserTimeout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_USER_TIMEOUT is Linux's")
	}
	for _, limit := range []*ConnLimit{nil, NewConnLimit(0, 0)} {
		ln, err := Listen(t.Context(), "127.0.0.1:0", &ListenOptions{UserTimeout: 45 * time.Second, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				defer c.Close()
				var b [1]byte
				_, _ = c.Read(b[:])
			}
		}()
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if lc, ok := c.(*limitedConn); ok {
			c = lc.NetConn()
		}
		if got := userTimeout(c.(*net.TCPConn)); got != 45*time.Second {
			t.Fatalf("TCP_USER_TIMEOUT %v, want 45s", got)
		}
	}
}

// limitServer is an HTTP server on a Listen listener with limit; its handler
// answers "ok".
func limitServer(t *testing.T, limit *ConnLimit) string {
	t.Helper()
	ln, err := Listen(t.Context(), "127.0.0.1:0", &ListenOptions{Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// conn is a raw HTTP/1.1 client connection from a chosen loopback address.
type conn struct {
	net.Conn
	br *bufio.Reader
}

func dialFrom(t *testing.T, from, addr string) *conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &conn{Conn: c, br: bufio.NewReader(c)}
}

// get sends a GET on c and returns the status and body of the answer.
func (c *conn) get(t *testing.T) (int, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return resp.StatusCode, string(b)
}

// refused checks that status and body are the answer to a refused connection,
// whose message contains what.
func refused(t *testing.T, status int, body, what string) {
	t.Helper()
	var m struct {
		Error struct {
			Message string
			Data    struct{ Reason string }
		}
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || status != http.StatusServiceUnavailable ||
		m.Error.Data.Reason != string(spec.ReasonTooManyConnections) || !strings.Contains(m.Error.Message, what) {
		t.Fatalf("connection over the bound answered %d %s, want 503 too_many_connections (%s)", status, body, what)
	}
}

// At the bound per address, a new connection from that address is answered
// 503 too_many_connections and closed, without reaching the server; another
// address is served meanwhile; a connection that closes makes room.
func TestConnLimitPerAddress(t *testing.T) {
	limit := NewConnLimit(-1, 3)
	addr := limitServer(t, limit)
	var held []*conn
	for range 3 {
		c := dialFrom(t, "127.0.0.1", addr)
		if status, body := c.get(t); status != http.StatusOK {
			t.Fatalf("a connection under the bound: %d %s", status, body)
		}
		held = append(held, c)
	}
	over := dialFrom(t, "127.0.0.1", addr)
	status, body := over.get(t)
	refused(t, status, body, "from this address")
	if _, err := over.br.ReadByte(); err != io.EOF {
		t.Fatalf("a refused connection stays open (%v), want EOF", err)
	}
	// Another address is served, and the held connections still are.
	other := dialFrom(t, "127.0.0.2", addr)
	if status, body := other.get(t); status != http.StatusOK {
		t.Fatalf("a connection from another address: %d %s", status, body)
	}
	if status, _ := held[0].get(t); status != http.StatusOK {
		t.Fatalf("a held connection after the refusal: %d", status)
	}
	if total, perAddress := limit.Refused(); total != 0 || perAddress != 1 || limit.Conns() != 4 {
		t.Fatalf("refused %d in total and %d per address, %d open; want 0, 1 and 4", total, perAddress, limit.Conns())
	}

	// A held connection closes: the server sees it, and the address has room.
	_ = held[0].Close()
	poll.Until(t, 10*time.Second, "the closed connection uncounted", func() bool { return limit.Conns() == 3 })
	if status, body := dialFrom(t, "127.0.0.1", addr).get(t); status != http.StatusOK {
		t.Fatalf("a connection after one closed: %d %s", status, body)
	}
}

// At the bound in total, a new connection from any address is refused; a Go
// http.Client reads the answer (not a reset).
func TestConnLimitTotal(t *testing.T) {
	limit := NewConnLimit(2, -1)
	addr := limitServer(t, limit)
	for _, from := range []string{"127.0.0.1", "127.0.0.2"} {
		if status, _ := dialFrom(t, from, addr).get(t); status != http.StatusOK {
			t.Fatalf("a connection under the bound: %d", status)
		}
	}
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}).DialContext}
	defer tr.CloseIdleConnections()
	for range 3 {
		resp, err := (&http.Client{Transport: tr}).Post("http://"+addr+"/", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatalf("a refused POST: %v, want the 503 answer", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		refused(t, resp.StatusCode, string(b), "to this server")
	}
	if total, perAddress := limit.Refused(); total != 3 || perAddress != 0 {
		t.Fatalf("refused %d in total and %d per address; want 3 and 0", total, perAddress)
	}
}

// IPv4-mapped IPv6 addresses count as IPv4; IPv6 addresses by their /64.
func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5":                  "127.0.0.1",
		"[::ffff:10.0.0.1]:5":          "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:5":     "2001:db8:1:2::",
		"[2001:db8:1:2:ffff::1]:443":   "2001:db8:1:2::",
		"[fe80::1%eth0]:5":             "fe80::",
		"[2001:db8:1:3:3:4:5:6]:65000": "2001:db8:1:3::",
	} {
		a, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := addrKey(a).String(); got != want {
			t.Errorf("addrKey(%s) = %s, want %s", in, got, want)
		}
	}
}
