package http_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// versionLog records the MCP-Protocol-Version header of each POST, by the
// body's method.
type versionLog struct {
	next http.Handler
	mu   sync.Mutex
	seen map[string][]string
}

func (l *versionLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		l.mu.Lock()
		l.seen[m.Method] = append(l.seen[m.Method], r.Header.Get(httptransport.HeaderProtocolVersion))
		l.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	l.next.ServeHTTP(w, r)
}

// After initialize, a session's requests carry the protocol version its answer
// agreed on, not the one the ClientConn was configured with.
func TestClientAgreedVersion(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	log := &versionLog{next: h, seen: map[string][]string{}}
	srv := httptest.NewServer(log)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		core.Close()
	})
	c := httptransport.Dial(srv.URL, &httptransport.ClientOptions{Client: srv.Client(), Protocol: "2025-03-26"})
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Read(ctx); err != nil || !strings.Contains(string(m), `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize answer %s, %v", m, err)
	}
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if got := log.seen["ping"]; len(got) != 1 || got[0] != "2025-11-25" {
		t.Fatalf("ping went with MCP-Protocol-Version %q, want 2025-11-25", got)
	}
}
