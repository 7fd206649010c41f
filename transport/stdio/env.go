package stdio

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
)

// baseEnv names the variables of this process a child server gets without
// being asked: what a program needs to find its interpreter, its home and its
// locale, and nothing that holds a credential. The TypeScript SDK's stdio
// client draws the same line (getDefaultEnvironment); the locale, the time zone
// and the temporary directory are added because they carry no secret and
// change what a program writes.
var baseEnv = map[string][]string{
	"posix":   {"HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER"},
	"windows": {"APPDATA", "COMSPEC", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE", "PROGRAMFILES", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE"},
}

// BaseEnv returns the names of the variables a child gets from this process
// by default (Environ).
func BaseEnv() []string {
	if runtime.GOOS == "windows" {
		return slices.Clone(baseEnv["windows"])
	}
	return slices.Clone(baseEnv["posix"])
}

// Environ returns the environment of a child server: this process's variables
// named by BaseEnv, then each of pass in order, which is either NAME (this
// process's variable of that name, when set) or NAME=value (set to that). A
// child never sees the rest of this process's environment: API keys, tokens,
// cloud credentials and the exporter headers of whoever started us are not a
// tool's to read. A value of this process that is a shell function ("() {")
// is left out, as it would be run by a shell child.
func Environ(pass []string) ([]string, error) {
	names := BaseEnv()
	set := map[string]string{}
	var order []string
	add := func(name, value string) {
		if _, ok := set[name]; !ok {
			order = append(order, name)
		}
		set[name] = value
	}
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok && !strings.HasPrefix(v, "()") {
			add(n, v)
		}
	}
	for _, p := range pass {
		name, value, literal := strings.Cut(p, "=")
		if !validEnvName(name) {
			return nil, fmt.Errorf("stdio: environment variable %q: want NAME or NAME=value", p)
		}
		if literal {
			add(name, value)
			continue
		}
		if v, ok := os.LookupEnv(name); ok {
			add(name, v)
		}
	}
	env := make([]string, 0, len(order))
	for _, n := range order {
		env = append(env, n+"="+set[n])
	}
	return env, nil
}

// validEnvName reports whether name is a portable environment variable name:
// letters, digits and underscores, not starting with a digit.
func validEnvName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for _, c := range []byte(name) {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
