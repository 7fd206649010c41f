package stdio

import (
	"syscall"
	"unsafe"
)

// unread returns the bytes written to f (a pipe or socket) that its reader has
// not read yet; ok is false when f cannot tell (a file, a terminal).
func unread(fd uintptr) (n int, ok bool) {
	var v int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v)))
	if errno != 0 {
		return 0, false
	}
	return int(v), true
}
