package resume

import (
	"slices"

	"github.com/mcp-resume/mcp-resume/resume/internal/queue"
)

// outbox is the engine's index of a request's queued messages: numbers, kinds, keys
// and sizes, and the bytes only for an engine without a Store (otherwise they live
// in the Store). Entries are in ascending seq. It is guarded by its Request's
// mutex.
type outbox struct {
	entries []entry
	// first is entries' array while it holds at most two: a request that
	// holds its newest progress alone (a countdown away) holds two for a
	// moment at each step, and makes no array for them.
	first   [2]entry
	bytes   int
	last    uint64 // last sequence number given out
	dropped uint64 // messages dropped under the budget
	// superseded holds the progress entries a newer one of the same key
	// replaced (some may have left since), in the order they were: what
	// enforce drops first, and stale past the history, without a scan of the
	// queue. The newest progress of each key is pkey's pseq, or in pmore once
	// a second key comes (rare: one call, one progress token).
	superseded []replaced
	pkey       string
	pseq       uint64
	pmore      map[string]uint64
}

// replaced is a progress entry superseded at a time (the engine's clock).
type replaced struct {
	seq uint64
	at  int64
}

type entry struct {
	seq  uint64
	size int32
	kind Kind
	data []byte // the message, when the engine has no Store
}

func (q *outbox) next() uint64 { q.last++; return q.last }

// add indexes m, and keeps its bytes with keep; now is when (the engine's
// clock), for a progress message that supersedes another.
func (q *outbox) add(m Message, keep bool, now int64) {
	if q.entries == nil {
		q.entries = q.first[:0]
	}
	e := entry{seq: m.Seq, size: int32(len(m.Data)), kind: m.Kind}
	if keep {
		e.data = m.Data
	}
	q.entries = append(q.entries, e)
	q.bytes += len(m.Data)
	if m.Kind == KindProgress {
		q.supersede(m.Key, m.Seq, now)
	}
}

// supersede records seq as the newest progress of key, and the one it replaces,
// if still queued, as superseded at now.
func (q *outbox) supersede(key string, seq uint64, now int64) {
	var prev uint64
	switch {
	case q.pseq == 0 || q.pkey == key:
		prev, q.pkey, q.pseq = q.pseq, key, seq
	default:
		if q.pmore == nil {
			q.pmore = make(map[string]uint64)
		}
		prev = q.pmore[key]
		q.pmore[key] = seq
	}
	if prev == 0 || !q.has(prev) {
		return
	}
	q.superseded = append(q.superseded, replaced{prev, now})
	if len(q.superseded) > 2*len(q.entries)+16 { // let go of those that left, amortized
		q.superseded = slices.DeleteFunc(q.superseded, func(s replaced) bool { return !q.has(s.seq) })
	}
}

// stale returns the numbers of the progress entries superseded before
// cutoff (the engine's clock) that are still queued, and forgets them.
func (q *outbox) stale(cutoff int64) []uint64 {
	n := 0
	for n < len(q.superseded) && q.superseded[n].at < cutoff {
		n++
	}
	if n == 0 {
		return nil
	}
	var drop []uint64
	for _, s := range q.superseded[:n] {
		if q.has(s.seq) {
			drop = append(drop, s.seq)
		}
	}
	q.superseded = slices.Delete(q.superseded, 0, n)
	if len(q.superseded) == 0 {
		q.superseded = nil
	}
	return drop
}

func (q *outbox) find(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(q.entries, seq, func(e entry, s uint64) int {
		switch {
		case e.seq < s:
			return -1
		case e.seq > s:
			return 1
		}
		return 0
	})
}

func (q *outbox) has(seq uint64) bool { _, ok := q.find(seq); return ok }

func (q *outbox) hasAfter(seq uint64) bool {
	return len(q.entries) > 0 && q.entries[len(q.entries)-1].seq > seq
}

func (q *outbox) count(k Kind) int {
	n := 0
	for _, e := range q.entries {
		if e.kind == k {
			n++
		}
	}
	return n
}

// upTo returns the numbers of the entries with seq <= ack, of every kind or, when
// only is not nil, of the kinds it accepts.
func (q *outbox) upTo(ack uint64, only func(Kind) bool) []uint64 {
	var out []uint64
	for _, e := range q.entries {
		if e.seq > ack {
			break
		}
		if only == nil || only(e.kind) {
			out = append(out, e.seq)
		}
	}
	return out
}

// remove drops the named entries.
func (q *outbox) remove(seqs []uint64) {
	if len(seqs) == 1 { // the common case: one delivered message
		if i, ok := q.find(seqs[0]); ok {
			q.bytes -= int(q.entries[i].size)
			q.entries = queue.Remove(q.entries, i) // a replay drops the head, one by one
		}
	} else {
		drop := make(map[uint64]bool, len(seqs))
		for _, s := range seqs {
			drop[s] = true
		}
		q.entries = slices.DeleteFunc(q.entries, func(e entry) bool {
			if drop[e.seq] {
				q.bytes -= int(e.size)
				return true
			}
			return false
		})
	}
	switch n := len(q.entries); {
	case n == 0:
		q.entries = nil // give the backing array back
	case n <= len(q.first):
		// Back to the start of the request's own array (a removed head
		// leaves entries further along it, or in one of their own).
		if &q.entries[0] != &q.first[0] {
			copy(q.first[:], q.entries)
			clear(q.first[n:])
			q.entries = q.first[:n]
		}
	case cap(q.entries) >= 8 && n <= cap(q.entries)/4:
		// A queue that grew (a burst, the progress history of a client
		// away) and emptied does not keep its peak's array.
		q.entries = append(make([]entry, 0, 2*n), q.entries...)
	}
}

// enforce applies the byte budget and returns the numbers of the entries to drop:
// first every progress entry but the newest of its key, then droppable
// notifications, oldest first. Responses and server-to-client requests never go.
func (q *outbox) enforce(budget int) []uint64 {
	if q.bytes <= budget {
		return nil
	}
	var drop []uint64
	size := q.bytes
	for _, s := range q.superseded {
		if i, ok := q.find(s.seq); ok {
			drop = append(drop, s.seq)
			size -= int(q.entries[i].size)
		}
	}
	q.superseded = q.superseded[:0]
	for _, e := range q.entries {
		if size <= budget {
			break
		}
		if e.kind == KindNotification {
			drop = append(drop, e.seq)
			size -= int(e.size)
			q.dropped++
		}
	}
	return drop
}
