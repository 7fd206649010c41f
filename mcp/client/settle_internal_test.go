package client

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
)

// A call's result waits for its progress callback under way: a value read
// on one connection (the one a cut ended) is passed on before the call's
// result, which came on another, is returned. (A gateway passes progress on
// to its own client and seals its call's notifications when the call
// returns: a value passed on after that is lost.)
func TestResultWaitsForProgressCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &Client{}
		c.update(func(st *state) { *st = newState() })
		c.quiet = sync.NewCond(c.st.Locker())
		entered, release := make(chan struct{}), make(chan struct{})
		var passedOn bool
		cl := c.newCall(spec.MethodToolsCall, &CallOptions{Progress: func(Progress) {
			close(entered)
			<-release
			passedOn = true
		}})
		c.update(func(st *state) { st.add(cl) })
		old := &link{}
		m, derr := spec.Decode([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(cl.id) + `,"progress":10,"_meta":{"io.mcp-resume/seq":10}}}`))
		if derr != nil {
			t.Fatal(derr)
		}
		go c.progress(old, m) // the old connection's reader, passing value 10 on
		<-entered
		c.update(func(*state) { cl.finish([]byte(`{}`), nil) }) // the result, on the new connection
		returned := make(chan struct{})
		go func() {
			c.settle(cl)
			close(returned)
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-returned:
			t.Fatal("the call returned while its progress was being passed on")
		default:
		}
		close(release)
		<-returned
		if !passedOn {
			t.Fatal("the progress was not passed on")
		}
	})
}
