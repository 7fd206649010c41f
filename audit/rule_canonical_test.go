package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// hashArguments, with isCanonical's shortcut, hashes any bytes as the
// decoding of them all did: the canonical JSON's hash when they are JSON,
// theirs when not.
func FuzzHashArguments(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"text":"hello"}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":{"y":[1,2.50,-0,1e400,9007199254740993],"x":null}}`,
		`{ "a":1}`, `{"a":1} `, `{"a":1}}`, `{"a":1}]`, `{"a":1} {`, `{"a":"\u0041"}`, `{"a":"<&>"}`, `{"a":"\u2028"}`,
		"{\"a\":\"\u2028\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\uFFFD\"}", `[true,false,null]`, `"x"`, `01`, `1.`, `-`, `1e`, `[1,]`,
		`{"a":truex}`, `{"":1,"a":2}`, `{"a":1,"":2}`, `{"ab":1,"a":2}`, `{"a":1,"ab":2}`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		got := hashArguments(args)
		canon := args
		if v, valid := decodeArguments(args); valid {
			canon = canonical(v)
		}
		sum := sha256.Sum256(canon)
		if want := hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("hashArguments(%q) = %s; the decoding's %s (of %q); isCanonical %v", args, got, want, canon, isCanonical(args))
		}
	})
}

// BenchmarkApplyHash is RuleHash on an echo call's arguments, in canonical
// form (isCanonical's shortcut) and not (decoded and encoded again).
func BenchmarkApplyHash(b *testing.B) {
	rs := Rules{"echo": RuleHash}
	for _, args := range []string{`{"text":"hello"}`, `{ "text": "hello" }`} {
		b.Run(args, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var ev Event
				rs.Apply("echo", json.RawMessage(args), &ev)
			}
		})
	}
}
