package http_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

var tokenField = regexp.MustCompile(`"resumeToken"\s*:\s*"([^"]+)"`)

// tokenConn records every resume token in the messages that cross it, either way:
// the ones the server issues, and the forged ones of the suite's error cases, down
// to 32 characters (an issued token has 43). Shorter strings ("abc" in the
// bad-input cases) are not tokens, and may well occur in a log by chance (in a
// session's UUID).
type tokenConn struct {
	transport.Conn
	mu     *sync.Mutex
	tokens map[string]bool
}

func (c tokenConn) note(msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range tokenField.FindAllSubmatch(msg, -1) {
		if len(m[1]) >= 32 {
			c.tokens[string(m[1])] = true
		}
	}
}

func (c tokenConn) Read(ctx context.Context) ([]byte, error) {
	b, err := c.Conn.Read(ctx)
	c.note(b)
	return b, err
}

func (c tokenConn) Write(ctx context.Context, msg []byte) error {
	c.note(msg)
	return c.Conn.Write(ctx, msg)
}

// The shared end-to-end suite over HTTP, with authentication and every log at
// debug level: no resume token issued, nor the API key, appears in any log line;
// the lines carry the session and the principal.
func TestLogsCarryNoTokens(t *testing.T) {
	var logs logbuf.Buffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	s := newServer(t, &mcp.Options{Logger: &log}, &httptransport.Options{Keys: keys(t), Logger: &log})
	client := &http.Client{Transport: transport.BearerTransport("key-bob", s.srv.Client().Transport)}
	var mu sync.Mutex
	tokens := map[string]bool{}
	e2etest.Run(t, e2etest.Harness{
		Dial: func(t testing.TB) transport.Conn {
			c := httptransport.Dial(s.url, &httptransport.ClientOptions{Client: client})
			t.Cleanup(func() { _ = c.Close() })
			return tokenConn{Conn: c, mu: &mu, tokens: tokens}
		},
		Reconnect: true,
	})
	s.h.Close() // the last log lines are written
	s.core.Close()

	mu.Lock()
	defer mu.Unlock()
	if len(tokens) < 10 {
		t.Fatalf("only %d tokens seen in the suite's traffic", len(tokens))
	}
	out := logs.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 20 || !strings.Contains(out, `"level":"debug"`) {
		t.Fatalf("only %d log lines, or none at debug level", len(lines))
	}
	for tok := range tokens {
		if strings.Contains(out, tok) {
			t.Errorf("token %s... appears in the logs", tok[:6])
		}
	}
	if strings.Contains(out, "key-bob") {
		t.Error("the API key appears in the logs")
	}
	if !strings.Contains(out, `"principal":"bob"`) || !strings.Contains(out, `"session":"`) || !strings.Contains(out, `"request":`) {
		t.Error("no log line carries the principal, the session or a request id")
	}
}
