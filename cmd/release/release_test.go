package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testFiles = []archiveFile{
	{name: "top/b.txt", mode: 0o644, data: []byte("b")},
	{name: "top/sub/c", mode: 0o755, data: []byte("c")},
	{name: "top/a", mode: 0o755, data: bytes.Repeat([]byte("a"), 10000)},
}

// An archive's bytes depend on its files' names, modes and contents and the
// time given, not on the order the files come in; its entries are sorted,
// owned by 0:0 and carry that time.
func TestArchivesDeterministic(t *testing.T) {
	mtime := time.Unix(1796542038, 0).UTC()
	reversed := slices.Clone(testFiles)
	slices.Reverse(reversed)
	dir := t.TempDir()
	for _, w := range []struct {
		ext   string
		write func(string, []archiveFile, time.Time) error
	}{{"tar.gz", writeTarGz}, {"zip", writeZip}} {
		a, b := filepath.Join(dir, "a."+w.ext), filepath.Join(dir, "b."+w.ext)
		if err := w.write(a, testFiles, mtime); err != nil {
			t.Fatal(err)
		}
		if err := w.write(b, reversed, mtime); err != nil {
			t.Fatal(err)
		}
		ab, _ := os.ReadFile(a)
		bb, _ := os.ReadFile(b)
		if !bytes.Equal(ab, bb) {
			t.Errorf("%s: two archives of the same files differ", w.ext)
		}
	}

	want := []string{"top/ 755", "top/sub/ 755", "top/a 755", "top/b.txt 644", "top/sub/c 755"}
	f, _ := os.Open(filepath.Join(dir, "a.tar.gz"))
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header: time %v, name %q; want neither", zr.ModTime, zr.Name)
	}
	var got []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Name+" "+fmt.Sprintf("%o", h.Mode))
		if !h.ModTime.Equal(mtime) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("tar %s: mtime %v uid %d gid %d uname %q gname %q", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("tar entries %q, want %q", got, want)
	}

	zf, err := zip.OpenReader(filepath.Join(dir, "a.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zf.Close()
	got = nil
	for _, e := range zf.File {
		got = append(got, e.Name+" "+fmt.Sprintf("%o", e.Mode().Perm()))
		if !e.Modified.Equal(mtime) {
			t.Errorf("zip %s: modified %v, want %v", e.Name, e.Modified, mtime)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("zip entries %q, want %q", got, want)
	}
}

func TestVersionsAndTargets(t *testing.T) {
	for _, v := range []string{"v1.2.3", "v0.0.0-interop", "v1.0.0-rc.1"} {
		if err := checkVersion(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"", "1.2.3", "v1.2", "v01.2.3", "v1.2.3+meta", "v1.2.3-"} {
		if checkVersion(v) == nil {
			t.Errorf("%q passed", v)
		}
	}
	if ts, err := parseTargets(allTargets); err != nil || len(ts) != 6 {
		t.Errorf("the default targets: %v, %v", ts, err)
	}
	for _, s := range []string{"linux/386", "linux/amd64,linux/amd64", ""} {
		if _, err := parseTargets(s); err == nil {
			t.Errorf("targets %q passed", s)
		}
	}
}

// The release run twice, into two directories, writes the same SHA256SUMS,
// and each sum is its file's. It builds this machine's target only (with the
// npm packages when npm is on PATH), so that the binary in the archive can
// say its version.
func TestReleaseReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mcp-resume twice: not with -short")
	}
	tgt := runtime.GOOS + "/" + runtime.GOARCH
	if !slices.Contains(supported, tgt) {
		tgt = "linux/amd64"
	}
	withNPM := true
	if _, err := exec.LookPath("npm"); err != nil {
		withNPM = false
		t.Log("npm not on PATH: the npm packages are not built")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1796542038")
	const version = "v0.0.0-test.1"
	var sums [2]string
	dirs := [2]string{filepath.Join(t.TempDir(), "dist"), filepath.Join(t.TempDir(), "other", "dist")}
	for i, dir := range dirs {
		var log bytes.Buffer
		start := time.Now()
		err := run([]string{"--version", version, "--out", dir, "--targets", tgt, "--npm=" + strconv.FormatBool(withNPM)}, &log)
		if err != nil {
			t.Fatalf("release: %v\n%s", err, log.String())
		}
		t.Logf("release %d: %s", i+1, time.Since(start).Round(time.Millisecond))
		b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = string(b)
		for _, line := range strings.Split(strings.TrimSpace(sums[i]), "\n") {
			sum, name, ok := strings.Cut(line, "  ")
			got, err := fileSHA256(filepath.Join(dir, filepath.FromSlash(name)))
			if !ok || err != nil || got != sum {
				t.Errorf("SHA256SUMS line %q: the file's sum is %s (%v)", line, got, err)
			}
		}
	}
	if sums[0] != sums[1] {
		t.Fatalf("two releases differ:\n%s\n%s", sums[0], sums[1])
	}
	t.Logf("SHA256SUMS:\n%s", sums[0])

	goos, goarch, _ := strings.Cut(tgt, "/")
	base := "mcp-resume_" + version + "_" + goos + "_" + goarch
	want := []string{base + ".spdx.json", base + ".tar.gz"}
	if goos == "windows" {
		want[1] = base + ".zip"
	}
	if withNPM {
		want = append(want, "npm/mcp-resume-0.0.0-test.1.tgz", "npm/mcp-resume-"+target{goos, goarch}.npmOS()+"-"+target{goos, goarch}.npmCPU()+"-0.0.0-test.1.tgz")
	}
	for _, w := range want {
		if !strings.Contains(sums[0], "  "+w+"\n") {
			t.Errorf("SHA256SUMS does not list %s", w)
		}
	}

	// The SBOM: SPDX 2.3 of the binary, naming modules the binary links.
	var doc spdxDoc
	b, err := os.ReadFile(filepath.Join(dirs[0], base+".spdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, p := range doc.Packages {
		names[p.Name] = p.VersionInfo
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2026-12-06T07:27:18Z" ||
		names["github.com/mcp-resume/mcp-resume"] != version || names["github.com/mark3labs/mcp-go"] == "" || names["stdlib"] != runtime.Version() {
		t.Errorf("SBOM: version %s, created %s, packages %v", doc.SPDXVersion, doc.CreationInfo.Created, names)
	}
	if len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("SBOM: %d packages, %d relationships", len(doc.Packages), len(doc.Relationships))
	}

	// The binary in the archive says the version it was stamped with.
	if goos != runtime.GOOS || goarch != runtime.GOARCH || goos == "windows" {
		return
	}
	x := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", filepath.Join(dirs[0], base+".tar.gz"), "-C", x).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	exe := filepath.Join(x, base, "mcp-resume")
	out, err := exec.Command(exe, "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != version {
		t.Errorf("mcp-resume version: %q, %v; want %s", out, err, version)
	}

	// The SBOM's modules are those go version -m reads from the binary.
	out, err = exec.Command("go", "version", "-m", exe).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var deps, listed []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "dep" {
			deps = append(deps, f[1]+"@"+f[2])
		}
	}
	for _, p := range doc.Packages[2:] {
		listed = append(listed, p.Name+"@"+p.VersionInfo)
	}
	slices.Sort(deps)
	slices.Sort(listed)
	if len(deps) < 10 || !slices.Equal(deps, listed) {
		t.Errorf("go version -m lists %d modules, the SBOM %d:\n%q\n%q", len(deps), len(listed), deps, listed)
	}
}
