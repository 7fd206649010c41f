package mcp

import "time"

// instant is a moment of this process's clock in 8 bytes, where a time.Time
// takes 24: what each call and span holds of the times it keeps.
type instant int64

// epoch is the moment instants count from.
var epoch = time.Now()

// now returns the instant it is.
func now() instant { return instant(time.Since(epoch)) }

// time returns the instant as a time.Time, with the monotonic reading that
// durations between instants are taken with.
func (i instant) time() time.Time { return epoch.Add(time.Duration(i)) }
