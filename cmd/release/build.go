package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// target is a platform a release builds for.
type target struct {
	goos, goarch string
}

func (t target) String() string { return t.goos + "/" + t.goarch }

// exe is the binary's file name on the target.
func (t target) exe() string {
	if t.goos == "windows" {
		return "mcp-resume.exe"
	}
	return "mcp-resume"
}

// npmOS and npmCPU are the target as Node names it (process.platform,
// process.arch), which npm's os and cpu fields match.
func (t target) npmOS() string {
	if t.goos == "windows" {
		return "win32"
	}
	return t.goos
}

func (t target) npmCPU() string {
	if t.goarch == "amd64" {
		return "x64"
	}
	return t.goarch
}

// supported are the targets whose names the npm packages know.
var supported = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

func parseTargets(s string) ([]target, error) {
	var ts []target
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(supported, f) {
			return nil, fmt.Errorf("target %q is not one of %s", f, strings.Join(supported, ", "))
		}
		goos, goarch, _ := strings.Cut(f, "/")
		t := target{goos, goarch}
		if slices.Contains(ts, t) {
			return nil, fmt.Errorf("target %s named twice", f)
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return nil, errors.New("no target")
	}
	return ts, nil
}

// build builds cmd/mcp-resume for t into dir, stamped with the version, and
// returns the binary's path. The environment is fixed where it changes the
// output: no cgo, the baseline instruction sets, no GOFLAGS of the caller's,
// no VCS stamp (the commit is in the SBOM; a tree without .git builds the same
// bytes).
func (c *config) build(t target, dir string) (string, error) {
	bin := filepath.Join(dir, t.exe())
	cmd := exec.Command("go", "build",
		"-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+c.version,
		"-o", bin, "./cmd/mcp-resume")
	cmd.Dir = c.repo
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS="+t.goos, "GOARCH="+t.goarch,
		"GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=", "GOEXPERIMENT=")
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build for %s: %w", t, err)
	}
	return bin, nil
}
