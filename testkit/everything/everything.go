// Package everything gives tests the official MCP reference server,
// @modelcontextprotocol/server-everything from npm, as a real third-party
// upstream: installed once into the repository's .tools directory (as .ci/run
// does before the tests), then started with node.
package everything

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/testkit/freeport"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// Version is the package version the tests use.
const Version = "2026.8.31"

var (
	once    sync.Once
	path    string
	failure error
)

// Path returns the server's entry point (dist/index.js), installing the package
// with npm when it is not there yet: $MR_EVERYTHING when set, else
// .tools/everything under the module root. Without node and npm the test is
// skipped, unless MR_REQUIRE_EVERYTHING is set (CI), where it fails.
func Path(t testing.TB) string {
	t.Helper()
	once.Do(func() { path, failure = install() })
	if failure != nil {
		if _, err := exec.LookPath("node"); err != nil && os.Getenv("MR_REQUIRE_EVERYTHING") == "" {
			t.Skipf("server-everything: %v (node is not installed)", failure)
		}
		t.Fatalf("server-everything: %v", failure)
	}
	return path
}

func install() (string, error) {
	if p := os.Getenv("MR_EVERYTHING"); p != "" {
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".tools", "everything-"+Version)
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err == nil {
		return entry, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	// Installed beside and renamed into place, so that test binaries of several
	// packages installing at once never see half an installation.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "everything-install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", tmp, "@modelcontextprotocol/server-everything@"+Version)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm install: %v: %s", err, out.Bytes())
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(entry); serr != nil { // not installed by another package's tests meanwhile
			return "", err
		}
	}
	return entry, nil
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// StartHTTP runs the server's Streamable HTTP transport on a free port and
// returns its endpoint once it accepts connections; it is killed when the test
// ends.
func StartHTTP(t testing.TB) string {
	t.Helper()
	path := Path(t)
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	port := ports[0]
	cmd := exec.Command("node", path, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	poll.Until(t, 20*time.Second, "server-everything listening on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr + "/mcp"
}
