//go:build !linux

package transport

import (
	"net"
	"time"
)

func setUserTimeout(*net.TCPConn, time.Duration) {}

func userTimeout(*net.TCPConn) time.Duration { return 0 }

func fileLimit() int { return 0 }
