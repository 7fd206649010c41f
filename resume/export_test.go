package resume

// QueuedDeadlines returns the number of deadlines in e's queues, stale ones included.
func QueuedDeadlines(e *Engine) int {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	n := 0
	for _, q := range e.tm.q {
		n += len(q)
	}
	return n
}

// HoldsWriteLock reports whether r holds the write lock of an attachment
// (Request.lastW).
func HoldsWriteLock(r *Request) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastW != nil
}
