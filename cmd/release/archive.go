package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// archiveFile is a regular file of an archive.
type archiveFile struct {
	name string // slash-separated, below one top directory
	mode fs.FileMode
	data []byte
}

// entries returns the files' directories and the files, sorted by name, so that
// an archive's order depends on nothing but the names.
func entries(files []archiveFile) (dirs []string, sorted []archiveFile) {
	seen := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.name); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	sorted = slices.Clone(files)
	slices.SortFunc(sorted, func(a, b archiveFile) int { return strings.Compare(a.name, b.name) })
	return dirs, sorted
}

// writeTarGz writes a gzipped ustar archive of files: every entry owned by
// 0:0 with no owner names, modified at mtime, directories first; the gzip
// header carries no name and no time.
func writeTarGz(dst string, files []archiveFile, mtime time.Time) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf) // the default level: the best saves 0.3% of a binary in 2.5 times the time
	tw := tar.NewWriter(zw)
	dirs, sorted := entries(files)
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR,
		}); err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
	}
	for _, f := range sorted {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: f.name, Mode: int64(f.mode.Perm()), Size: int64(len(f.data)),
			ModTime: mtime, Format: tar.FormatUSTAR,
		}); err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// writeZip writes a zip archive of files, deflated, modified at mtime (in
// UTC), with Unix modes, directories first.
func writeZip(dst string, files []archiveFile, mtime time.Time) error {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	dirs, sorted := entries(files)
	for _, d := range dirs {
		h := &zip.FileHeader{Name: d + "/", Method: zip.Store, Modified: mtime}
		h.SetMode(fs.ModeDir | 0o755)
		if _, err := zw.CreateHeader(h); err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
	}
	for _, f := range sorted {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: mtime}
		h.SetMode(f.mode.Perm())
		w, err := zw.CreateHeader(h)
		if err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
		if _, err := w.Write(f.data); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}
