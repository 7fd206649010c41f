package bucket

import (
	"testing"
	"time"
)

// A new bucket is full; each take spends a token; it refills one per
// interval up to its capacity; an empty one says when it has a token again.
func TestBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var b Bucket
	for i := range 3 {
		if ok, _ := b.Take(t0, 3, time.Minute); !ok {
			t.Fatalf("take %d of a new bucket of 3 refused", i+1)
		}
	}
	if ok, wait := b.Take(t0.Add(20*time.Second), 3, time.Minute); ok || wait != 40*time.Second {
		t.Fatalf("an empty bucket: %v, wait %v; want refused, 40s", ok, wait)
	}
	if ok, _ := b.Take(t0.Add(time.Minute), 3, time.Minute); !ok {
		t.Fatal("a token refilled after a minute was refused")
	}
	if b.Full(t0.Add(2*time.Minute), 3, time.Minute) || !b.Full(t0.Add(time.Hour), 3, time.Minute) {
		t.Fatal("Full: want false after 2 of 3 minutes, true an hour on")
	}
}
