package mcp_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
)

// serveAs serves core on in-memory connections of sessions with the given options,
// each with an initialized resumable client.
func serveAs(t *testing.T, core *mcp.Server) func(opts *mcp.SessionOptions) *e2etest.Client {
	dial := serveSessions(t, core)
	return func(opts *mcp.SessionOptions) *e2etest.Client {
		c := e2etest.NewClient(t, dial(t, opts))
		c.Initialize(`{"resumableRequests":{}}`)
		return c
	}
}

// startBlock starts a call of the block tool as id and returns its resume token.
func startBlock(t *testing.T, c *e2etest.Client, id string) string {
	t.Helper()
	c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"block"}}`, id)
	return e2etest.PolicyOf(t, c.Next()).ResumeToken
}

// A brute-force loop of wrong tokens from principal alice hits the limit after the
// burst: her getStatus and resume are answered rate_limited with a retryAfter,
// even with her own token, and her cancel by token is ignored. Bob's token checks,
// wrong or right, are unaffected. Once her bucket refills (virtual time), her own
// token works again.
func TestTokenFailureRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 4)
		core := mcp.New(blockServer(causes), &mcp.Options{TokenFailureBurst: 5, TokenFailureRefill: 2 * time.Second})
		dial := serveAs(t, core)
		alice := dial(&mcp.SessionOptions{Principal: "alice", Remote: "192.0.2.1"})
		bob := dial(&mcp.SessionOptions{Principal: "bob", Remote: "192.0.2.1"}) // same address
		aTok, bTok := startBlock(t, alice, "1"), startBlock(t, bob, "1")
		const wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

		for i := range 5 {
			if _, e := alice.GetStatus(fmt.Sprint(100+i), "1", wrong); e == nil || e.Reason != spec.ReasonNotFound {
				t.Fatalf("wrong token #%d: %v, want not_found", i+1, e)
			}
		}
		_, e := alice.GetStatus("200", "1", wrong)
		if e == nil || e.Reason != spec.ReasonRateLimited || e.Code != spec.CodeInvalidRequest || e.RetryAfter != 2 {
			t.Fatalf("wrong token past the burst: %+v, want rate_limited with retryAfter 2", e)
		}
		if _, e := alice.GetStatus("201", "1", aTok); e == nil || e.Reason != spec.ReasonRateLimited {
			t.Fatalf("alice's own token while limited: %v, want rate_limited", e)
		}
		alice.Resume(`1`, aTok)
		if m, _ := alice.Response("1"); m.Error == nil || m.Error.Reason != spec.ReasonRateLimited || m.Error.RetryAfter < 1 {
			t.Fatalf("resume while limited: %s, want rate_limited", m.Raw)
		}
		// Another session of alice's shares her bucket: its cancel by token is
		// ignored.
		alice2 := dial(&mcp.SessionOptions{Principal: "alice", Remote: "192.0.2.3"})
		alice2.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"resumeToken":%q}}`, aTok)
		alice2.Quiet("202")

		// Bob, from the same address, is not held back by alice's failures.
		for i := range 3 {
			if _, e := bob.GetStatus(fmt.Sprint(300+i), "1", wrong); e == nil || e.Reason != spec.ReasonNotFound {
				t.Fatalf("bob's wrong token: %v, want not_found", e)
			}
		}
		if st, e := bob.GetStatus("310", "1", bTok); e != nil || st.Status != "processing" {
			t.Fatalf("bob's getStatus: %+v %v, want processing", st, e)
		}

		// One refill interval later alice has one check again; her own token works
		// and costs nothing.
		time.Sleep(2 * time.Second)
		for i := range 3 {
			if st, e := alice.GetStatus(fmt.Sprint(400+i), "1", aTok); e != nil || st.Status != "processing" {
				t.Fatalf("alice's getStatus after the refill: %+v %v, want processing (her cancel while limited was ignored)", st, e)
			}
		}
		if _, e := alice.GetStatus("410", "1", wrong); e == nil || e.Reason != spec.ReasonNotFound {
			t.Fatalf("wrong token after the refill: %v, want not_found", e)
		}
		if _, e := alice.GetStatus("411", "1", wrong); e == nil || e.Reason != spec.ReasonRateLimited {
			t.Fatalf("second wrong token after one refill: %v, want rate_limited", e)
		}
		select {
		case c := <-causes:
			t.Fatalf("a request ended: %v", c)
		default:
		}
	})
}

// Sessions without a principal are limited by remote address: one address's
// failures do not hold back another's; a negative burst turns the limit off.
func TestTokenFailureRateLimitByAddress(t *testing.T) {
	const wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	synctest.Test(t, func(t *testing.T) {
		core := mcp.New(blockServer(make(chan error, 4)), &mcp.Options{TokenFailureBurst: 2})
		dial := serveAs(t, core)
		a, a2, b := dial(&mcp.SessionOptions{Remote: "192.0.2.1"}), dial(&mcp.SessionOptions{Remote: "192.0.2.1"}), dial(&mcp.SessionOptions{Remote: "192.0.2.2"})
		bTok := startBlock(t, b, "1")
		a.GetStatus("1", "1", wrong)
		a2.GetStatus("1", "1", wrong) // another session from the same address
		if _, e := a.GetStatus("2", "1", wrong); e == nil || e.Reason != spec.ReasonRateLimited || e.RetryAfter != 1 {
			t.Fatalf("third failure from one address: %+v, want rate_limited, retryAfter 1 (default refill)", e)
		}
		if st, e := b.GetStatus("2", "1", bTok); e != nil || st.Status != "processing" {
			t.Fatalf("another address: %+v %v, want processing", st, e)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		core := mcp.New(blockServer(make(chan error, 4)), &mcp.Options{TokenFailureBurst: -1})
		c := serveAs(t, core)(nil)
		for i := range 50 {
			if _, e := c.GetStatus(fmt.Sprint(i), "1", wrong); e == nil || e.Reason != spec.ReasonNotFound {
				t.Fatalf("failure #%d without a limit: %v, want not_found", i+1, e)
			}
		}
	})
}
