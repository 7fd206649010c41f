package reservoir

import "testing"

// The sample holds Size values, each of them added, and every added value
// has its fair chance: of 100 values sampled 10 at a time, over many
// samples, each is kept about a tenth of the time.
func TestSampleIsUniform(t *testing.T) {
	const n, size, rounds = 100, 10, 20000
	kept := make([]int, n)
	for range rounds {
		s := Sample[int]{Size: size}
		for v := range n {
			s.Add(v)
		}
		if len(s.kept) != size {
			t.Fatalf("%d kept, want %d", len(s.kept), size)
		}
		for _, v := range s.kept {
			kept[v]++
		}
	}
	want := rounds * size / n
	for v, k := range kept {
		if k < want*8/10 || k > want*12/10 {
			t.Errorf("value %d kept %d times in %d samples, want about %d", v, k, rounds, want)
		}
	}
	var empty Sample[string]
	if v := empty.Random(); v != "" {
		t.Errorf("an empty sample's Random = %q", v)
	}
}
