package spec

import (
	"bytes"
	"testing"
)

// FuzzContainsFold checks the fast search of "_meta\"" against the obvious one:
// every window, compared without regard to case.
func FuzzContainsFold(f *testing.F) {
	for _, s := range []string{`{"_meta":{}}`, `{"_META":1}`, `{"x":"_Meta"}`, `_meta`, `__meta"`, `{"a":"_mEtA\""}`, "_\u212aeta\"", ``, `_`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		const sub = `_meta"`
		want := false
		for i := 0; i+len(sub) <= len(s); i++ {
			if bytes.EqualFold(s[i:i+len(sub)], []byte(sub)) {
				want = true
				break
			}
		}
		if got := containsFold(s, sub); got != want {
			t.Fatalf("containsFold(%q) = %v, want %v", s, got, want)
		}
	})
}
