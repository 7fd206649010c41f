package resume

import "iter"

// Reading a request's messages without attaching: Watch, Events and Peek (a
// task's event stream and state).

// Watcher follows the messages a request queues, for a reader of them that is
// not its client's attachment (a task's event stream): Watch. Its methods are
// safe for concurrent use (they take the request's lock), for one reader:
// each Take hands what it returns to its caller alone.
type Watcher struct {
	r  *Request
	ch chan struct{} // a token when there is news (capacity 1)
	// Guarded by r.mu: the messages queued since the last Take, up to
	// maxWatched; lagged when more came (read them from Events instead).
	got    []Message
	lagged bool
}

// maxWatched bounds the messages a Watcher holds for its reader.
const maxWatched = 4096

// Watch returns a Watcher of the request's messages from now on. Stop it.
func (r *Request) Watch() *Watcher {
	w := &Watcher{r: r, ch: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.watchers == nil {
		r.watchers = map[*Watcher]struct{}{}
	}
	r.watchers[w] = struct{}{}
	r.mu.Unlock()
	return w
}

// C gets a token each time a message is queued or the request leaves the
// engine.
func (w *Watcher) C() <-chan struct{} { return w.ch }

// Take returns the messages queued since the last Take, oldest first, and
// whether some were not kept for it (more than it holds came meanwhile): then
// the reader reads them with Events.
func (w *Watcher) Take() (msgs []Message, lagged bool) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	msgs, lagged = w.got, w.lagged
	w.got, w.lagged = nil, false
	return msgs, lagged
}

// Stop ends the Watcher.
func (w *Watcher) Stop() {
	w.r.mu.Lock()
	delete(w.r.watchers, w)
	w.r.mu.Unlock()
}

// tellWatchersLocked hands m (none when its Seq is 0) to each Watcher.
func (r *Request) tellWatchersLocked(m Message) {
	for w := range r.watchers {
		if m.Seq > 0 {
			if len(w.got) < maxWatched {
				w.got = append(w.got, m)
			} else {
				w.lagged = true
			}
		}
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// Events returns the messages the request holds with a sequence number above
// after, oldest first, as they are read (from the store, a batch at a time:
// a reader sends the first while the rest are read), without delivering or
// changing anything (a task's event stream: many readers, none of them its
// client's attachment), and whether the request had ended when asked
// (completed or failed: its response is among them). A request that left the
// engine answers its error (ErrCancelled, ErrExpired, ...).
func (r *Request) Events(after uint64) (msgs iter.Seq2[Message, error], ended bool, err error) {
	r.mu.Lock()
	if r.gone.Load() {
		defer r.mu.Unlock()
		return nil, true, r.endedErrLocked()
	}
	ended = r.state.Ended()
	r.mu.Unlock()
	return r.replay(after), ended, nil
}

// Peek returns the messages the request holds that a client must still get,
// server-to-client requests and the final response (KindRequest, KindResponse),
// without attaching anything or changing any state: a read of a task's state
// (tasks/get) while a client may be attached to it elsewhere.
func (r *Request) Peek() ([]Message, error) {
	if r.gone.Load() {
		r.mu.Lock()
		defer r.mu.Unlock()
		return nil, r.endedErrLocked()
	}
	var out []Message
	for m, err := range r.replay(0) {
		if err != nil {
			return nil, err
		}
		if m.Kind.retained() {
			out = append(out, m)
		}
	}
	return out, nil
}
