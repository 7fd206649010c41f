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

const wrongToken = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// A brute-force loop of wrong tokens from a session of principal alice hits the
// limit after the burst: that session's getStatus and resume by token are
// answered rate_limited with a retryAfter, and its cancel by token is ignored,
// except for the request it started, whose token it holds. Another session of
// alice's is not held back, nor is bob, behind the same address. Once the
// bucket refills (virtual time), the session may check one token again.
func TestTokenFailureRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 4)
		core, err := mcp.New(blockServer(causes), &mcp.Options{TokenFailureBurst: 5, TokenFailureRefill: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveAs(t, core)
		alice := dial(&mcp.SessionOptions{Principal: "alice", Remote: "192.0.2.1"})
		bob := dial(&mcp.SessionOptions{Principal: "bob", Remote: "192.0.2.1"}) // same address
		aTok, bTok := startBlock(t, alice, "1"), startBlock(t, bob, "1")
		alice2 := dial(&mcp.SessionOptions{Principal: "alice", Remote: "192.0.2.3"})
		a2Tok := startBlock(t, alice2, "2")

		for i := range 5 {
			if _, e := alice.GetStatus(fmt.Sprint(100+i), "1", wrongToken); e == nil || e.Reason != spec.ReasonNotFound {
				t.Fatalf("wrong token #%d: %v, want not_found", i+1, e)
			}
		}
		_, e := alice.GetStatus("200", "1", wrongToken)
		if e == nil || e.Reason != spec.ReasonRateLimited || e.Code != spec.CodeRateLimited || e.RetryAfter != 2 || e.RetryAfterMs != 2000 {
			t.Fatalf("wrong token past the burst: %+v, want -32023 rate_limited with retryAfter 2 (retryAfterMs 2000)", e)
		}
		// Her other session's request is not one this session carries.
		if _, e := alice.GetStatus("201", "2", a2Tok); e == nil || e.Reason != spec.ReasonRateLimited {
			t.Fatalf("another session's token while limited: %v, want rate_limited", e)
		}
		alice.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"resumeToken":%q}}`, a2Tok)
		alice.Quiet("202")
		// The request it started is: no guess finds it.
		if st, e := alice.GetStatus("203", "1", aTok); e != nil || st.Status != "processing" {
			t.Fatalf("alice's own request while limited: %+v %v, want processing", st, e)
		}

		// Alice's other session, and bob from the same address, are not held
		// back by the guessing session.
		if st, e := alice2.GetStatus("300", "1", aTok); e != nil || st.Status != "processing" {
			t.Fatalf("alice's other session: %+v %v, want processing", st, e)
		}
		for i := range 3 {
			if _, e := bob.GetStatus(fmt.Sprint(310+i), "1", wrongToken); e == nil || e.Reason != spec.ReasonNotFound {
				t.Fatalf("bob's wrong token: %v, want not_found", e)
			}
		}
		if st, e := bob.GetStatus("320", "1", bTok); e != nil || st.Status != "processing" {
			t.Fatalf("bob's getStatus: %+v %v, want processing", st, e)
		}

		// One refill interval later the session has one check again: the
		// cancel of request 2 while it was limited was ignored.
		time.Sleep(2 * time.Second)
		if st, e := alice.GetStatus("400", "2", a2Tok); e != nil || st.Status != "processing" {
			t.Fatalf("getStatus after the refill: %+v %v, want processing (the cancel while limited was ignored)", st, e)
		}
		if _, e := alice.GetStatus("410", "1", wrongToken); e == nil || e.Reason != spec.ReasonNotFound {
			t.Fatalf("wrong token after the refill: %v, want not_found", e)
		}
		if _, e := alice.GetStatus("411", "1", wrongToken); e == nil || e.Reason != spec.ReasonRateLimited {
			t.Fatalf("second wrong token after one refill: %v, want rate_limited", e)
		}
		select {
		case c := <-causes:
			t.Fatalf("a request ended: %v", c)
		default:
		}
	})
}

// Sessions without a principal share their remote address's allowance of
// TokenFailureBurst*100 failures: a new session per guess gets no more than that,
// while other addresses are not held back; a negative burst turns the limit off.
func TestTokenFailureRateLimitByAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(blockServer(make(chan error, 4)), &mcp.Options{TokenFailureBurst: 1})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveAs(t, core)
		b := dial(&mcp.SessionOptions{Remote: "192.0.2.2"})
		bTok := startBlock(t, b, "1")
		for i := range 100 {
			a := dial(&mcp.SessionOptions{Remote: "192.0.2.1"})
			if _, e := a.GetStatus("1", "1", wrongToken); e == nil || e.Reason != spec.ReasonNotFound {
				t.Fatalf("failure #%d from one address: %v, want not_found", i+1, e)
			}
			a.Close()
		}
		a := dial(&mcp.SessionOptions{Remote: "192.0.2.1"})
		if _, e := a.GetStatus("1", "1", wrongToken); e == nil || e.Reason != spec.ReasonRateLimited || e.RetryAfter != 1 {
			t.Fatalf("failure #101 from one address: %+v, want rate_limited, retryAfter 1 (default refill)", e)
		}
		if st, e := b.GetStatus("2", "1", bTok); e != nil || st.Status != "processing" {
			t.Fatalf("another address: %+v %v, want processing", st, e)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(blockServer(make(chan error, 4)), &mcp.Options{TokenFailureBurst: -1})
		if err != nil {
			t.Fatal(err)
		}
		c := serveAs(t, core)(nil)
		for i := range 50 {
			if _, e := c.GetStatus(fmt.Sprint(i), "1", wrongToken); e == nil || e.Reason != spec.ReasonNotFound {
				t.Fatalf("failure #%d without a limit: %v, want not_found", i+1, e)
			}
		}
	})
}

// An attacker guessing tokens continuously from the owner's address (no
// authentication: loopback, a proxy, a NAT), from one session or from a new
// session per guess, never gets the owner's getStatus or resume from the
// owner's session refused, not even after that session failed a check of its
// own; and it gets about one checked guess per second beyond the bursts (the
// session's, or the address's when it opens a session per guess).
func TestTokenFailureOwnerNotLockedOut(t *testing.T) {
	const (
		burst   = 2
		guesses = 20 // per second, for a minute
	)
	for _, tc := range []struct {
		name       string
		perGuess   bool // a new session for each guess
		wantBursts int  // checked guesses beyond one per second
		// freshRefused: a new session of the owner's is refused until the
		// next refill, the attack having spent the address's allowance.
		freshRefused bool
	}{
		{"one session", false, burst, false},
		{"session per guess", true, 100 * burst, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				core, err := mcp.New(blockServer(make(chan error, 4)), &mcp.Options{TokenFailureBurst: burst})
				if err != nil {
					t.Fatal(err)
				}
				dial := serveAs(t, core)
				here := &mcp.SessionOptions{Remote: "127.0.0.1"}
				owner := dial(here)
				tok := startBlock(t, owner, "1")
				// The owner's session fails a check of its own (a request it
				// forgot had ended).
				if _, e := owner.GetStatus(`"stale"`, "7", wrongToken); e == nil || e.Reason != spec.ReasonNotFound {
					t.Fatalf("owner's stale token: %v, want not_found", e)
				}

				attacker := dial(here)
				checked, refused := 0, 0
				for i := range 60 * guesses {
					if i > 0 {
						time.Sleep(time.Second / guesses)
					}
					if tc.perGuess {
						attacker.Close()
						attacker = dial(here)
					}
					_, e := attacker.GetStatus(fmt.Sprint(i), "1", wrongToken)
					switch {
					case e != nil && e.Reason == spec.ReasonNotFound:
						checked++
					case e != nil && e.Reason == spec.ReasonRateLimited:
						refused++
					default:
						t.Fatalf("guess #%d: %v, want not_found or rate_limited", i+1, e)
					}
					if i%guesses == 0 {
						if st, e := owner.GetStatus(fmt.Sprintf(`"own-%d"`, i), "1", tok); e != nil || st.Status != "processing" {
							t.Fatalf("owner's getStatus after %d guesses: %+v %v, want processing", i+1, st, e)
						}
					}
				}
				t.Logf("the attacker's guesses in a minute: %d checked, %d refused", checked, refused)
				if want := 60 + tc.wantBursts; checked < want-3 || checked > want+2 {
					t.Errorf("the attacker's checked guesses in a minute: %d (%d refused), want about %d", checked, refused, want)
				}
				// A new session is one the server cannot tell from the
				// attacker's next: it is refused while the attack has spent the
				// address's allowance.
				fresh := dial(here)
				st, e := fresh.GetStatus("1", "1", tok)
				if tc.freshRefused {
					if e == nil || e.Reason != spec.ReasonRateLimited {
						t.Fatalf("a new session of the owner's after the attack spent the address's allowance: %+v %v, want rate_limited", st, e)
					}
					time.Sleep(time.Duration(e.RetryAfter) * time.Second)
					st, e = fresh.GetStatus("2", "1", tok)
				}
				if e != nil || st.Status != "processing" {
					t.Fatalf("a new session of the owner's: %+v %v, want processing", st, e)
				}
				// Resumed, the request answers nothing until it ends (refused,
				// it would be answered rate_limited at once).
				owner.Resume("1", tok)
				if ms := owner.Quiet(`"ping"`); len(ms) != 0 {
					t.Fatalf("owner's resume: %s, want nothing before the request ends", ms[0].Raw)
				}
			})
		})
	}
}
