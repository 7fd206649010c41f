package transport

import (
	"bytes"
	"context"
	"io"
	"sync"
	"sync/atomic"
)

// Pipe returns two connected in-memory Conns. A message written on one is read on
// the other. Each direction buffers up to 1,024 messages, after which Write blocks.
// Closing either end closes both: the other end reads io.EOF once its buffer is
// drained, like a socket. Read and Write also return ctx.Err() when their ctx
// ends; both are safe for concurrent use.
func Pipe() (Conn, Conn) {
	ab, ba := make(chan []byte, 1024), make(chan []byte, 1024)
	shared := &pipeState{done: make(chan struct{})}
	return &pipeConn{in: ba, out: ab, st: shared}, &pipeConn{in: ab, out: ba, st: shared}
}

type pipeState struct {
	once sync.Once
	done chan struct{} // closed when either end closes
}

type pipeConn struct {
	closed atomic.Bool // this end was closed
	in     <-chan []byte
	out    chan<- []byte
	st     *pipeState
	wmu    sync.Mutex // serializes Write
}

func (p *pipeConn) Read(ctx context.Context) ([]byte, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	select {
	case m := <-p.in:
		return m, nil
	default:
	}
	select {
	case m := <-p.in:
		return m, nil
	case <-p.st.done:
		select {
		case m := <-p.in:
			return m, nil
		default:
			if p.closed.Load() {
				return nil, ErrClosed
			}
			return nil, io.EOF
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipeConn) Write(ctx context.Context, msg []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	select {
	case <-p.st.done:
		return ErrClosed
	default:
	}
	select {
	case p.out <- bytes.Clone(msg):
		return nil
	case <-p.st.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipeConn) Close() error {
	p.closed.Store(true)
	p.st.once.Do(func() { close(p.st.done) })
	return nil
}
