package stdio

import (
	"syscall"
	"unsafe"
)

// unread returns the bytes written to fd that its reader has not read yet; ok is
// false when fd cannot tell (a file, a terminal). A pipe reports the bytes in it
// (FIONREAD works on either end); a Unix socket (what Node gives a child for its
// stdio) reports, on the writer's end, what the peer has not consumed (SIOCOUTQ).
func unread(fd uintptr) (n int, ok bool) {
	var st syscall.Stat_t
	if syscall.Fstat(int(fd), &st) != nil {
		return 0, false
	}
	var req uintptr
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		req = syscall.TIOCINQ // FIONREAD
	case syscall.S_IFSOCK:
		req = syscall.TIOCOUTQ // SIOCOUTQ
	default:
		return 0, false
	}
	var v int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(unsafe.Pointer(&v))); errno != 0 {
		return 0, false
	}
	return int(v), true
}
