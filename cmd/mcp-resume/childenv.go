package main

import (
	"strings"

	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

// envList is the repeatable --env flag of the commands that start a server as
// a child (gateway -- CMD, call --stdio CMD): NAME passes this process's
// variable of that name on, NAME=value sets one. The child gets these and
// stdio.BaseEnv, nothing else of ours.
type envList []string

// envUsage is --env's help, shared by the commands that take it.
var envUsage = "a variable for the child server, `NAME` (passed on from this environment) or NAME=value (repeatable); the child gets only these and " +
	strings.Join(stdio.BaseEnv(), ", ") + ", never the rest of this environment (its API keys and credentials)"

func (l *envList) String() string {
	names := make([]string, 0, len(*l))
	for _, e := range *l {
		n, _, _ := strings.Cut(e, "=")
		names = append(names, n) // names only: values may be secrets
	}
	return strings.Join(names, ", ")
}

func (l *envList) Set(s string) error {
	if _, err := stdio.Environ([]string{s}); err != nil {
		return err
	}
	*l = append(*l, s)
	return nil
}
