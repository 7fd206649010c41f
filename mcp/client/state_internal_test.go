package client

import (
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

// The state's check finds a change that breaks an invariant, at the change.
func TestStateCheckFindsBrokenInvariants(t *testing.T) {
	cases := map[string]struct {
		breakIt func(st *state, cl *call)
		want    string
	}{
		"a link without ready":                {func(st *state, _ *call) { st.conn.link = &link{} }, "ready is closed"},
		"ready without a link":                {func(st *state, _ *call) { close(st.conn.ready) }, "ready is closed"},
		"a call on a link it was not sent on": {func(_ *state, cl *call) { cl.link = &link{} }, "not sent on"},
		"a resume without a policy": {func(_ *state, cl *call) {
			cl.sent, cl.link, cl.resuming = true, &link{}, true
		}, "without a policy"},
		"a confirmation of no resume":         {func(_ *state, cl *call) { cl.unconfirmed = true }, "did not send"},
		"a call in flight on a closed client": {func(st *state, _ *call) { st.closed = true }, "closed client"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &Client{}
			c.update(func(st *state) { *st = newState() })
			cl := c.newCall(spec.MethodToolsCall, nil)
			c.update(func(st *state) { st.add(cl) })
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) {
					t.Fatalf("check panicked with %v, want a panic saying %q", r, tc.want)
				}
			}()
			c.update(func(st *state) { tc.breakIt(st, cl) })
		})
	}
	c := &Client{}
	c.update(func(st *state) { *st = newState() })
	c.update(func(st *state) { st.closed = true })
	cl := c.newCall(spec.MethodToolsCall, nil)
	if c.update(func(st *state) { st.add(cl) }); !cl.finished || cl.err != ErrClosed {
		t.Fatalf("a call added to a closed client: finished %v, err %v; want ErrClosed", cl.finished, cl.err)
	}
}
