package mcp

import (
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

// What Options.PolicyOf makes of a tool's policy is shared by the calls it
// makes the same for; the table's own when it changes nothing; another when
// it changes.
func TestAdjustedPolicyShared(t *testing.T) {
	task := AsTask
	s, err := New(server.NewMCPServer("test", "1"), &Options{PolicyOf: func(tool string, p Policy) Policy {
		if tool == "task" {
			p.Task = task
		}
		return p
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if a, b := s.policy("plain"), s.policy("plain"); a != b || a != s.table.Load().def {
		t.Error("a policy PolicyOf left as it was is not the table's")
	}
	a, b := s.policy("task"), s.policy("task")
	if a != b || a.Task != AsTask {
		t.Errorf("the same adjusted policy is not shared (%p, %p) or not adjusted (%v)", a, b, a.Task)
	}
	task = TaskRequired
	if c := s.policy("task"); c == a || c.Task != TaskRequired || a.Task != AsTask {
		t.Errorf("another adjustment shares the earlier one's policy, or changed it: %v, %v", c.Task, a.Task)
	}
}
