package faultproxy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mcp-resume/mcp-resume/transport"
)

// Drive drives call to its result through any number of cuts, each attempt on
// a new connection from dial (a new session): initialize with the ack
// extension, then the call or its resume. It counts the attempts after the
// first in reconnects, and gives up after maxAttempts.
func Drive(dial func(context.Context) (transport.Conn, error), call *Call, reconnects *int, maxAttempts int) error {
	for attempt := 0; !call.Done(); attempt++ {
		if attempt > maxAttempts {
			return fmt.Errorf("no result after %d attempts (progress %v)", attempt, call.Progress())
		}
		if attempt > 0 {
			*reconnects++
		}
		if err := attemptOn(dial, call, attempt); err != nil {
			return err
		}
	}
	return call.Check()
}

// attemptOn is one attempt of Drive; a cut ends it without an error. Every read
// is bounded: a cut always ends an attempt, the bound only guards a test
// against hanging.
func attemptOn(dial func(context.Context) (transport.Conn, error), call *Call, attempt int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return nil // cut during the handshake
	}
	defer c.Close()
	send := func(msg string) bool { return c.Write(ctx, []byte(msg)) == nil }
	if !send(InitializeAck) {
		return nil
	}
	if b, err := c.Read(ctx); err != nil || !strings.Contains(string(b), `"id":0`) {
		return nil
	}
	if !send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`) || !send(call.Request(attempt)) {
		return nil
	}
	for {
		b, err := c.Read(ctx)
		if err != nil {
			return nil // cut
		}
		if done, err := call.Take(b); done || err != nil {
			return err
		}
	}
}
