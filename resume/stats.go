package resume

// Stats is a snapshot of an engine for monitoring: live requests by state and
// attachment, and counters since the engine started.
type Stats struct {
	// Live requests by state (ended requests leave the engine at once).
	Processing, Completed, Failed int
	// The tasks among them (StartOptions.Task), by state.
	TasksProcessing, TasksCompleted, TasksFailed int
	// Attached and Detached split the live requests by whether a client's stream
	// receives their messages now.
	Attached, Detached int
	// QueuedBytes is the size of every live request's queued messages.
	QueuedBytes int
	// Tombstones is the number of ended requests still answered expired or
	// cancelled.
	Tombstones int
	// Attaches counts successful Request.Attach calls: resumes, and stream
	// reconnects on transports that have them.
	Attaches uint64
	// Expired counts requests that ended expired: no client within maxWait, a
	// result unacknowledged past its retention, or released past MaxRetained.
	Expired uint64
	// Evicted counts the results among them released early (MaxRetained,
	// MaxBytes, MaxBytesPerPrincipal).
	Evicted uint64
	// TokenFailures counts lookups answered ErrUnknown: a wrong token, a wrong id,
	// another principal's token, or a request long gone.
	TokenFailures uint64
	// Unreadable counts the records skipped, at each listing of the store
	// (recovery in New, and each claim sweep after an instance is lost), because
	// the store could not decode them; they stay in the store, and one such
	// record counts again at the next listing.
	Unreadable uint64
}

// Stats returns a snapshot of the engine. It visits every live request, one lock
// at a time (never the engine's and a request's together), so the counts of
// different requests may be from slightly different moments.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	live := e.live.all()
	st := Stats{Tombstones: len(e.tombs)}
	e.mu.Unlock()
	for _, r := range live {
		r.mu.Lock()
		if r.gone.Load() {
			r.mu.Unlock()
			continue
		}
		switch r.state {
		case StateProcessing:
			st.Processing++
			if r.task {
				st.TasksProcessing++
			}
		case StateCompleted:
			st.Completed++
			if r.task {
				st.TasksCompleted++
			}
		case StateFailed:
			st.Failed++
			if r.task {
				st.TasksFailed++
			}
		}
		if r.att != nil {
			st.Attached++
		} else {
			st.Detached++
		}
		st.QueuedBytes += r.q.bytes
		r.mu.Unlock()
	}
	st.Attaches = e.attaches.Load()
	st.Expired = e.expired.Load()
	st.Evicted = e.evicted.Load()
	st.TokenFailures = e.tokenFailures.Load()
	st.Unreadable = e.unreadable.Load()
	return st
}
