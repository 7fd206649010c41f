// Command image builds mcp-resume's container image without a daemon or a
// registry: it cross-compiles the static binaries (linux/amd64, linux/arm64),
// lays out a from-scratch image for each, and writes a multi-arch OCI index as an
// OCI image layout directory and as an oci-archive tarball (the same layout,
// tarred), which podman loads.
//
// It lives in a module of its own (deploy/image/go.mod) so that the main
// module's go.mod does not carry go-containerregistry.
//
//	cd deploy/image && go run . -src ../.. -out ../../dist
//
// The output is a function of the source tree, the build machine's CA bundle and
// the Go toolchain: layer entries carry one fixed time (the commit's, or
// SOURCE_DATE_EPOCH), no user names, and sorted order; the gzip streams carry no
// time; the config's created is that same time. Two builds of one commit give
// the same index digest.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as: distroless' "nonroot", a uid no host account
// usually has.
const (
	uid      = 65532
	userName = "nonroot"
	home     = "/home/nonroot"
	binPath  = "usr/local/bin/mcp-resume"
)

type options struct {
	src       string
	out       string
	platforms []v1.Platform
	version   string
	revision  string
	created   time.Time
	caCerts   string
	caLicense string
	name      string
	source    string
}

func main() {
	var o options
	var platforms, epoch string
	flag.StringVar(&o.src, "src", "../..", "the main module's directory (mcp-resume's repository)")
	flag.StringVar(&o.out, "out", "", "output directory (default: SRC/dist); it gets image/ (an OCI layout) and mcp-resume-VERSION.oci.tar (an oci-archive)")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "platforms, comma-separated")
	flag.StringVar(&o.version, "version", "", "version: the binary's (main.version), the label's and the tag's (default: git describe --tags --always --dirty)")
	flag.StringVar(&epoch, "epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the time of every layer entry and of the config, in Unix seconds (default: $SOURCE_DATE_EPOCH, else the commit's time)")
	flag.StringVar(&o.caCerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to ship (Debian's ca-certificates)")
	flag.StringVar(&o.caLicense, "ca-license", "/usr/share/doc/ca-certificates/copyright", "the CA bundle's copyright file, shipped beside it when it exists")
	flag.StringVar(&o.name, "name", "localhost/mcp-resume", "image name for the reference annotation (NAME:VERSION)")
	flag.StringVar(&o.source, "source", "https://github.com/mcp-resume/mcp-resume", "org.opencontainers.image.source")
	flag.Parse()
	if err := run(&o, platforms, epoch); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o *options, platforms, epoch string) error {
	var err error
	if o.src, err = filepath.Abs(o.src); err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(o.src, "dist")
	}
	for _, p := range strings.Split(platforms, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || os != "linux" {
			return fmt.Errorf("platform %q: want linux/ARCH", p)
		}
		o.platforms = append(o.platforms, v1.Platform{OS: os, Architecture: arch})
	}
	if o.version == "" {
		if o.version, err = git(o.src, "describe", "--tags", "--always", "--dirty"); err != nil {
			return err
		}
	}
	if o.revision, err = git(o.src, "rev-parse", "HEAD"); err != nil {
		return err
	}
	if epoch == "" {
		if epoch, err = git(o.src, "log", "-1", "--format=%ct"); err != nil {
			return err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("epoch %q: %v", epoch, err)
	}
	o.created = time.Unix(sec, 0).UTC()

	base, err := baseLayer(o)
	if err != nil {
		return err
	}
	idx := v1.ImageIndex(empty.Index)
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range o.platforms {
		start := time.Now()
		bin, err := build(o, p)
		if err != nil {
			return err
		}
		img, err := image(o, p, base, bin)
		if err != nil {
			return err
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s/%s: binary %d bytes (built in %s), manifest %s\n", p.OS, p.Architecture, len(bin), time.Since(start).Round(time.Second), d)
		p := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &p},
		})
	}
	idx = mutate.Annotations(idx, labels(o)).(v1.ImageIndex)
	return write(o, idx)
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// build compiles the static binary for p. timetzdata embeds the time zone
// database (about 450 kB), so the image needs no /usr/share/zoneinfo.
func build(o *options, p v1.Platform) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "mcp-resume-image")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "mcp-resume")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "timetzdata",
		"-ldflags", "-s -w -buildid= -X main.version="+o.version,
		"-o", bin, "./cmd/mcp-resume")
	cmd.Dir = o.src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=-mod=readonly")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s/%s: %v", p.OS, p.Architecture, err)
	}
	return os.ReadFile(bin)
}

// entry is one file or directory of a layer.
type entry struct {
	path string // without a leading slash
	mode int64
	uid  int
	data []byte
	dir  bool
}

// baseLayer holds what every platform shares: the directories, the CA bundle,
// the user database and an empty /tmp.
func baseLayer(o *options) (v1.Layer, error) {
	certs, err := os.ReadFile(o.caCerts)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %v (on Debian: apt-get install ca-certificates)", err)
	}
	es := []entry{
		{path: "etc", mode: 0o755, dir: true},
		{path: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				fmt.Sprintf("%s:x:%d:%d:%s:%s:/sbin/nologin\n", userName, uid, uid, userName, home))},
		{path: "etc/group", mode: 0o644, data: []byte(
			"root:x:0:\n" + fmt.Sprintf("%s:x:%d:\n", userName, uid))},
		{path: "etc/ssl", mode: 0o755, dir: true},
		{path: "etc/ssl/certs", mode: 0o755, dir: true},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{path: "home", mode: 0o755, dir: true},
		{path: strings.TrimPrefix(home, "/"), mode: 0o700, uid: uid, dir: true},
		{path: "tmp", mode: 0o1777, dir: true},
		{path: "usr", mode: 0o755, dir: true},
		{path: "usr/local", mode: 0o755, dir: true},
		{path: "usr/local/bin", mode: 0o755, dir: true},
	}
	if lic, err := os.ReadFile(o.caLicense); err == nil {
		es = append(es,
			entry{path: "usr/share", mode: 0o755, dir: true},
			entry{path: "usr/share/doc", mode: 0o755, dir: true},
			entry{path: "usr/share/doc/ca-certificates", mode: 0o755, dir: true},
			entry{path: "usr/share/doc/ca-certificates/copyright", mode: 0o644, data: lic})
	}
	return layer(o, es)
}

// layer makes a gzipped tar layer of es, sorted by path, every entry at
// o.created, owned by number only.
func layer(o *options, es []entry) (v1.Layer, error) {
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{
			Name:    e.path,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: o.created,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func labels(o *options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "mcp-resume",
		"org.opencontainers.image.description": "MCP requests that survive lost connections: mcp-resume serve, gateway, connect",
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.created":     o.created.Format(time.RFC3339),
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.url":         o.source,
	}
}

func image(o *options, p v1.Platform, base v1.Layer, bin []byte) (v1.Image, error) {
	binLayer, err := layer(o, []entry{{path: binPath, mode: 0o755, data: bin}})
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "deploy/image: CA bundle, passwd, group, directories", Comment: "base"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "deploy/image: go build -trimpath -tags timetzdata (CGO_ENABLED=0)", Comment: "mcp-resume " + o.version}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: o.created}
	cf.Author = ""
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint:   []string{"/" + binPath},
		Cmd:          []string{"serve", "--http", "0.0.0.0:8080"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
		WorkingDir:   home,
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		Labels:       labels(o),
		StopSignal:   "SIGTERM",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.created":  o.created.Format(time.RFC3339),
	}).(v1.Image), nil
}

// write puts idx in OUT/image (an OCI image layout, the index named NAME:VERSION
// in index.json) and tars that directory into OUT/mcp-resume-VERSION.oci.tar.
func write(o *options, idx v1.ImageIndex) error {
	dir := filepath.Join(o.out, "image")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	ref := o.name + ":" + o.version
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
	})); err != nil {
		return err
	}
	archive := filepath.Join(o.out, "mcp-resume-"+o.version+".oci.tar")
	if err := tarDir(dir, archive, o.created); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	st, err := os.Stat(archive)
	if err != nil {
		return err
	}
	fmt.Printf("index %s (%s)\nlayout %s\narchive %s (%d bytes)\n", d, ref, dir, archive, st.Size())
	return nil
}

// tarDir writes the files under dir, sorted, at t, into the tar file out.
func tarDir(dir, out string, t time.Time) error {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, path := range files {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: t, Mode: 0o644, Format: tar.FormatPAX}
		if st.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, st.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		src.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
