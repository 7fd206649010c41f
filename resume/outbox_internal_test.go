package resume

import "testing"

// An outbox that grew and emptied down to a quarter of its array lets the
// array go: a request's index does not keep its peak's size (a burst, the
// progress history of a client away).
func TestOutboxShrinks(t *testing.T) {
	var q outbox
	for i := range 8 {
		q.add(Message{Seq: q.next(), Kind: KindNotification, Data: []byte(`{}`)}, true, int64(i))
	}
	if cap(q.entries) < 8 {
		t.Fatalf("cap %d after 8 entries", cap(q.entries))
	}
	q.remove([]uint64{1, 2, 3, 4, 5, 6})
	if len(q.entries) != 2 || q.entries[0].seq != 7 || q.entries[1].seq != 8 || q.bytes != 4 {
		t.Fatalf("after the removal: %+v (%d bytes)", q.entries, q.bytes)
	}
	if cap(q.entries) > 4 {
		t.Errorf("2 entries keep an array of %d", cap(q.entries))
	}
	q.remove([]uint64{7})
	if len(q.entries) != 1 || q.entries[0].seq != 8 {
		t.Fatalf("after the head went: %+v", q.entries)
	}
}

// A request that holds its newest message alone (a countdown away, its
// newest progress) holds two entries for a moment at each step, the newest
// and the one it replaces: both live in the outbox's own array, so that a
// step makes no array and the request keeps none between steps.
func TestOutboxTwoInPlace(t *testing.T) {
	var q outbox
	data := []byte(`{}`)
	q.add(Message{Seq: q.next(), Kind: KindNotification, Data: data}, true, 0)
	drop := make([]uint64, 1)
	step := func() {
		drop[0] = q.entries[0].seq
		q.add(Message{Seq: q.next(), Kind: KindNotification, Data: data}, true, 0)
		q.remove(drop)
	}
	if allocs := testing.AllocsPerRun(100, step); allocs != 0 {
		t.Errorf("%.1f allocations a step", allocs)
	}
	if len(q.entries) != 1 || &q.entries[0] != &q.first[0] || q.entries[0].seq != q.last || q.first[1].data != nil {
		t.Errorf("after the steps: entries %+v, first %+v", q.entries, q.first)
	}
}
