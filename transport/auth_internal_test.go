package transport

import "testing"

// Replace revokes the keys it removes, and a key it gives to another
// principal; a key kept for the same principal stays valid, however the
// file's lines move.
func TestReplaceRevokes(t *testing.T) {
	ks, err := ParseKeys("alice:k1\nbob:k2\ncarol:k3\n")
	if err != nil {
		t.Fatal(err)
	}
	revoked := map[string]<-chan struct{}{}
	for _, k := range []string{"k1", "k2", "k3"} {
		revoked[k] = ks.lookup(k).revoked
	}
	next, err := ParseKeys("carol:k3\ndave:k2\n")
	if err != nil {
		t.Fatal(err)
	}
	ks.Replace(next)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if !closed(revoked["k1"]) || !closed(revoked["k2"]) || closed(revoked["k3"]) {
		t.Fatalf("revoked: k1 %v (removed), k2 %v (another principal's now), k3 %v (kept)",
			closed(revoked["k1"]), closed(revoked["k2"]), closed(revoked["k3"]))
	}
	if e := ks.lookup("k3"); e == nil || e.revoked != revoked["k3"] {
		t.Fatal("the kept key lost its watch")
	}
	if p, ok := ks.Lookup("k2"); !ok || p != "dave" {
		t.Fatalf("k2 is %q, %v; want dave's", p, ok)
	}
}
