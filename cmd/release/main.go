// Command release builds the release assets of mcp-resume: cmd/mcp-resume for
// every target, a deterministic archive and an SPDX 2.3 SBOM of each binary,
// the npm packages (a launcher, mcp-resume, and one package per platform
// holding its binary), and SHA256SUMS over all of them.
//
//	go run ./cmd/release --version v1.2.3 --out dist
//
// The same commit, version and Go toolchain give the same bytes: every
// timestamp is SOURCE_DATE_EPOCH (else the commit's time), every archive's
// entries are sorted with fixed modes and owners, and the binaries are built
// with -trimpath, without VCS stamping and with an empty build id
// (docs/release.md).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// allTargets are the platforms a release builds by default.
const allTargets = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64,windows/arm64"

// config is what one run builds.
type config struct {
	version string    // v1.2.3 or v1.2.3-rc.1
	out     string    // the directory of the assets; it must not exist, or be empty
	targets []target  // in the order given
	npm     bool      // build and pack the npm packages
	epoch   time.Time // every timestamp the assets carry
	repo    string    // the module's root
	commit  string    // the commit built, for the SBOM ("" outside git)
	log     io.Writer
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "the version to stamp, vMAJOR.MINOR.PATCH[-PRERELEASE] (required)")
	out := fs.String("out", "dist", "the directory to write the assets to; it must not exist or be empty")
	targets := fs.String("targets", allTargets, "the GOOS/GOARCH pairs to build, comma-separated")
	npm := fs.Bool("npm", true, "build the npm packages into OUT/npm with npm pack (needs npm)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./cmd/release --version vX.Y.Z [--out dist] [--targets %s] [--npm=false]\n\nThe timestamp of every asset is $SOURCE_DATE_EPOCH, else the commit's time.\n\n", allTargets)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c := &config{version: *version, out: *out, npm: *npm, log: stderr}
	if err := checkVersion(c.version); err != nil {
		return err
	}
	var err error
	if c.targets, err = parseTargets(*targets); err != nil {
		return err
	}
	if c.npm {
		if _, err := exec.LookPath("npm"); err != nil {
			return errors.New("npm is not on PATH: install it, or leave the npm packages out with --npm=false")
		}
	}
	if c.repo, err = moduleRoot(); err != nil {
		return err
	}
	c.commit = gitOutput(c.repo, "rev-parse", "HEAD")
	if c.commit != "" && gitOutput(c.repo, "status", "--porcelain") != "" {
		c.commit += " with uncommitted changes"
	}
	if c.epoch, err = sourceDate(c.repo); err != nil {
		return err
	}
	return c.release()
}

// versionRE is the versions a release takes: semantic versions with a v and an
// optional pre-release, which are both Go module versions and (without the v)
// npm versions.
var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func checkVersion(v string) error {
	if v == "" {
		return errors.New("--version is required (e.g. --version v1.2.3)")
	}
	if !versionRE.MatchString(v) {
		return fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH[-PRERELEASE]", v)
	}
	return nil
}

// moduleRoot is the directory of the go.mod of the current directory's module.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not in a Go module: run release from the mcp-resume repository")
	}
	return filepath.Dir(gomod), nil
}

// sourceDate is $SOURCE_DATE_EPOCH (reproducible-builds.org's convention),
// else the time of the commit checked out.
func sourceDate(repo string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	what := "SOURCE_DATE_EPOCH"
	if s == "" {
		s = gitOutput(repo, "log", "-1", "--format=%ct")
		what = "the commit's time"
	}
	if s == "" {
		return time.Time{}, errors.New("no SOURCE_DATE_EPOCH and no git commit to take the time from")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 315532800 { // a zip's MS-DOS time starts in 1980
		return time.Time{}, fmt.Errorf("%s %q is not a Unix time after 1980", what, s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// gitOutput is git's trimmed output in dir, or "" when git fails.
func gitOutput(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
