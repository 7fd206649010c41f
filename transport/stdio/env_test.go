package stdio_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

// A child started by Command with no environment of its own prints what it
// got: the base variables, none of the others.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("MCP_RESUME_API_KEYS", "alice:secret-key")
	t.Setenv("PATH", "/usr/bin:/bin")
	env := childEnv(t, exec.Command("env"))
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "MCP_RESUME_API_KEYS=") }) {
		t.Fatalf("the child sees the API keys: %q", env)
	}
	if !slices.Contains(env, "PATH=/usr/bin:/bin") {
		t.Fatalf("the child lacks PATH: %q", env)
	}

	// A cmd with an environment of its own keeps it.
	cmd := exec.Command("env")
	cmd.Env = []string{"ONLY=this"}
	if env := childEnv(t, cmd); !slices.Equal(env, []string{"ONLY=this"}) {
		t.Fatalf("explicit environment %q, want [ONLY=this]", env)
	}
}

func childEnv(t *testing.T, cmd *exec.Cmd) []string {
	t.Helper()
	if _, err := exec.LookPath("env"); err != nil {
		t.Skip("no env program")
	}
	c, err := stdio.Command(cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var env []string
	for {
		line, err := c.Read(t.Context())
		if err != nil {
			return env
		}
		env = append(env, string(line))
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("HOME", "/home/x")
	t.Setenv("SECRET_TOKEN", "s")
	t.Setenv("PASS_ME", "p")
	t.Setenv("SHELL", "() { evil; }")
	env, err := stdio.Environ([]string{"PASS_ME", "LIT=a=b", "HOME=/override", "UNSET_NAME_X"})
	if err != nil {
		t.Fatal(err)
	}
	has := func(kv string) bool { return slices.Contains(env, kv) }
	if !has("HOME=/override") || !has("PASS_ME=p") || !has("LIT=a=b") {
		t.Fatalf("env %q", env)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "SECRET_TOKEN=") || strings.HasPrefix(kv, "SHELL=") || strings.HasPrefix(kv, "UNSET_NAME_X") || kv == "HOME=/home/x" {
			t.Fatalf("env %q holds %s", env, kv)
		}
	}
	for _, bad := range []string{"", "=x", "1A", "A-B", "A B=c"} {
		if _, err := stdio.Environ([]string{bad}); err == nil {
			t.Errorf("Environ(%q): no error", bad)
		}
	}
}
