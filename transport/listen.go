package transport

import (
	"context"
	"net"
	"time"
)

// Listen listens for TCP connections on addr. With userTimeout > 0, every
// connection it accepts gives up on data its peer has not acknowledged for that
// long (TCP_USER_TIMEOUT, where the system has it): a client that vanished
// without a FIN or RST (a laptop that slept, a NAT that forgot the flow) is
// found when the server next writes to it (a keepalive comment or ping), within
// userTimeout, instead of after the kernel's retransmissions give up, about 15
// minutes later. Its requests are then detached, and their maxWait starts.
func Listen(ctx context.Context, addr string, userTimeout time.Duration) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil || userTimeout <= 0 {
		return ln, err
	}
	return &timeoutListener{Listener: ln, timeout: userTimeout}, nil
}

type timeoutListener struct {
	net.Listener
	timeout time.Duration
}

func (l *timeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		if tc, ok := c.(*net.TCPConn); ok {
			setUserTimeout(tc, l.timeout)
		}
	}
	return c, err
}
