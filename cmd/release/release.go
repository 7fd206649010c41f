package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// release writes every asset into c.out.
func (c *config) release() error {
	entries, err := os.ReadDir(c.out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty: remove it first", c.out)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "mcp-resume-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	readme, err := os.ReadFile(filepath.Join(c.repo, "README.md"))
	if err != nil {
		return err
	}

	bins := map[target]string{}
	for _, t := range c.targets {
		fmt.Fprintf(c.log, "release: building %s %s\n", t, c.version)
		dir := filepath.Join(work, "bin", t.goos+"-"+t.goarch)
		bin, err := c.build(t, dir)
		if err != nil {
			return err
		}
		bins[t] = bin
		exe, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		base := c.assetBase(t)
		files := []archiveFile{
			{name: base + "/" + t.exe(), mode: 0o755, data: exe},
			{name: base + "/README.md", mode: 0o644, data: readme},
		}
		if t.goos == "windows" {
			err = writeZip(filepath.Join(c.out, base+".zip"), files, c.epoch)
		} else {
			err = writeTarGz(filepath.Join(c.out, base+".tar.gz"), files, c.epoch)
		}
		if err != nil {
			return err
		}
		sbom, err := c.sbom(t, bin, exe)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.out, base+".spdx.json"), sbom, 0o644); err != nil {
			return err
		}
	}
	if c.npm {
		fmt.Fprintf(c.log, "release: npm packages\n")
		if err := c.npmPackages(filepath.Join(work, "npm"), bins); err != nil {
			return err
		}
	}
	if err := writeSums(c.out); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "release: %s written to %s\n", c.version, c.out)
	return nil
}

// assetBase is the name of a target's archive and SBOM, less the extension.
func (c *config) assetBase(t target) string {
	return fmt.Sprintf("mcp-resume_%s_%s_%s", c.version, t.goos, t.goarch)
}

// writeSums writes dir/SHA256SUMS over every other file below dir, sorted by
// path, in the format `sha256sum -c` reads.
func writeSums(dir string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel != "SHA256SUMS" {
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(paths)
	var b strings.Builder
	for _, p := range paths {
		sum, err := fileSHA256(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, p)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
