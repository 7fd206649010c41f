//go:build !linux

package stdio

func unread(uintptr) (int, bool) { return 0, false }
