package transport

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

func setUserTimeout(c *net.TCPConn, d time.Duration) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
}

// userTimeout reads TCP_USER_TIMEOUT back (for tests).
func userTimeout(c *net.TCPConn) time.Duration {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var ms int
	_ = rc.Control(func(fd uintptr) {
		ms, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	})
	return time.Duration(ms) * time.Millisecond
}

// fileLimit is the process's open-file limit (RLIMIT_NOFILE, as Go raised it
// at start), or 0 when it is unknown or unlimited.
func fileLimit() int {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
