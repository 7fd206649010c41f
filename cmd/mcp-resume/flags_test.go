package main

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// Flags go before or after a command's verb and arguments; "--" ends them.
func TestParseAnywhere(t *testing.T) {
	for _, tc := range []struct {
		args []string
		url  string
		js   bool
		rest []string
	}{
		{[]string{"--url", "U", "result", "ID"}, "U", false, []string{"result", "ID"}},
		{[]string{"result", "--url", "U", "ID"}, "U", false, []string{"result", "ID"}},
		{[]string{"result", "ID", "--url=U", "--json"}, "U", true, []string{"result", "ID"}},
		{[]string{"echo", "text=hi", "--json", "--", "--url", "x"}, "", true, []string{"echo", "text=hi", "--url", "x"}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		url := fs.String("url", "", "")
		js := fs.Bool("json", false, "")
		if err := parseAnywhere(fs, tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if *url != tc.url || *js != tc.js || !slices.Equal(fs.Args(), tc.rest) {
			t.Errorf("%q: url %q json %v args %q; want %q %v %q", tc.args, *url, *js, fs.Args(), tc.url, tc.js, tc.rest)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := parseAnywhere(fs, []string{"get", "--nope"}); err == nil {
		t.Error("an unknown flag after the verb: no error")
	}
}
