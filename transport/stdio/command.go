package stdio

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/transport"
)

// CommandConn is a Conn on the stdin and stdout of a child process: the client
// side of stdio, with Conn's concurrency. Close closes the child's stdin, gives
// it a moment to exit and then kills it, and waits for it; a Close made
// meanwhile waits for the first one.
type CommandConn struct {
	*Conn
	cmd       *exec.Cmd
	closeOnce sync.Once
	closeErr  error
}

var _ transport.Conn = (*CommandConn)(nil)

// commandGrace is how long Close lets a child exit on its own after its stdin
// closed.
const commandGrace = 2 * time.Second

// Command starts cmd and returns a Conn on its stdin and stdout. cmd.Stdin and
// cmd.Stdout must be unset; cmd.Stderr is left as the caller set it (nil discards
// the child's logs). A cmd whose Env is nil gets Environ(nil), not this
// process's whole environment (what exec.Cmd would give it): a server started
// to serve others must not read the secrets of whoever started us.
func Command(cmd *exec.Cmd, opts *Options) (*CommandConn, error) {
	if cmd.Stdin != nil || cmd.Stdout != nil {
		return nil, errors.New("stdio: Command needs a cmd with Stdin and Stdout unset")
	}
	if cmd.Env == nil {
		env, err := Environ(nil)
		if err != nil {
			return nil, err
		}
		cmd.Env = env
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdio: %s: %w", cmd.Path, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdio: %s: %w", cmd.Path, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stdio: start %s: %w", cmd.Path, err)
	}
	return &CommandConn{Conn: New(out, in, opts), cmd: cmd}, nil
}

// Close closes the connection and ends the child: it closes the child's stdin,
// waits up to two seconds for it to exit, kills it otherwise, and reaps it. It is
// safe to call more than once.
func (c *CommandConn) Close() error {
	c.closeOnce.Do(func() {
		err := c.Conn.Close()
		done := make(chan error, 1)
		go func() { done <- c.cmd.Wait() }()
		t := time.NewTimer(commandGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			_ = c.cmd.Process.Kill()
			<-done
		}
		c.closeErr = err
	})
	return c.closeErr
}
