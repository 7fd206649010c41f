package client

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
)

// Requests whose envelopes are made of the same base, capabilities and log
// level share one; any difference makes another; past maxEnvelopes the kept
// ones go, and are made again.
func TestEnvelopesShared(t *testing.T) {
	var es envelopes
	made := 0
	get := func(legacy bool, caps, level string) map[string]json.RawMessage {
		return es.get(legacy, json.RawMessage(caps), level, func() map[string]json.RawMessage {
			made++
			return map[string]json.RawMessage{"caps": json.RawMessage(caps), "level": json.RawMessage(strconv.Quote(level))}
		})
	}
	same := func(a, b map[string]json.RawMessage) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	a := get(false, `{"a":1}`, "info")
	if b := get(false, `{"a":1}`, "info"); !same(a, b) || made != 1 {
		t.Fatalf("the same envelope made %d times", made)
	}
	for _, c := range []struct {
		legacy      bool
		caps, level string
	}{
		{true, `{"a":1}`, "info"},       // another base
		{false, `{"roots":{}}`, "info"}, // other capabilities
		{false, `{"a":1}`, "debug"},     // another level
		{false, `{"a":1}`, ""},
		{false, `:1}`, `info{"a"`}, // the same bytes, split otherwise
	} {
		if b := get(c.legacy, c.caps, c.level); same(a, b) {
			t.Errorf("%+v shares the envelope of another", c)
		}
	}
	for i := range maxEnvelopes {
		get(false, `{}`, strconv.Itoa(i))
	}
	if len(es.m) > maxEnvelopes {
		t.Fatalf("%d envelopes kept, past %d", len(es.m), maxEnvelopes)
	}
	before := made
	get(false, `{"a":1}`, "info")
	if made != before+1 {
		t.Error("an envelope let go was not made again")
	}
}
