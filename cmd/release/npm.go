package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The npm packages, in the pattern esbuild made common: a launcher package,
// mcp-resume, whose bin is a Node script, with an optional dependency on a
// package per platform (@mcp-resume/linux-x64, @mcp-resume/win32-arm64, ...)
// that holds that platform's binary and whose os and cpu fields make npm
// install it only there. All have the release's version (without its v).

//go:embed npm/launcher.js
var launcherJS []byte

// npmScope is the scope of the platform packages.
const npmScope = "@mcp-resume"

// packageJSON is the part of package.json the packages use, in this order.
type packageJSON struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Description          string            `json:"description"`
	Repository           npmRepository     `json:"repository"`
	Homepage             string            `json:"homepage"`
	OS                   []string          `json:"os,omitempty"`
	CPU                  []string          `json:"cpu,omitempty"`
	Bin                  map[string]string `json:"bin,omitempty"`
	Files                []string          `json:"files"`
	Engines              map[string]string `json:"engines,omitempty"`
	OptionalDependencies map[string]string `json:"optionalDependencies,omitempty"`
	PreferUnplugged      bool              `json:"preferUnplugged,omitempty"`
	PublishConfig        map[string]string `json:"publishConfig,omitempty"`
}

type npmRepository struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// npmPlatform is the name of a target's platform package.
func npmPlatform(t target) string {
	return npmScope + "/" + t.npmOS() + "-" + t.npmCPU()
}

// npmPackages writes the packages below work and packs each into
// c.out/npm with npm pack.
func (c *config) npmPackages(work string, bins map[target]string) error {
	version := strings.TrimPrefix(c.version, "v")
	repo := npmRepository{"git", "git+https://github.com/mcp-resume/mcp-resume.git"}
	home := "https://github.com/mcp-resume/mcp-resume"
	dest, err := filepath.Abs(filepath.Join(c.out, "npm"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	launcher := packageJSON{
		Name:                 "mcp-resume",
		Version:              version,
		Description:          "MCP requests that survive disconnects: mcp-resume connect URL serves a remote MCP server to a desktop app over stdio",
		Repository:           repo,
		Homepage:             home,
		Bin:                  map[string]string{"mcp-resume": "bin/mcp-resume.js"},
		Files:                []string{"bin/"},
		Engines:              map[string]string{"node": ">=18"},
		OptionalDependencies: map[string]string{},
	}
	for _, t := range c.targets {
		name := npmPlatform(t)
		launcher.OptionalDependencies[name] = version
		dir := filepath.Join(work, t.npmOS()+"-"+t.npmCPU())
		exe, err := os.ReadFile(bins[t])
		if err != nil {
			return err
		}
		pj := packageJSON{
			Name:            name,
			Version:         version,
			Description:     fmt.Sprintf("The mcp-resume binary for %s (%s), installed by the mcp-resume package", t, t.npmOS()+"-"+t.npmCPU()),
			Repository:      repo,
			Homepage:        home,
			OS:              []string{t.npmOS()},
			CPU:             []string{t.npmCPU()},
			Files:           []string{"bin/"},
			PreferUnplugged: true,
			PublishConfig:   map[string]string{"access": "public"},
		}
		readme := fmt.Sprintf("# %s\n\nThe `mcp-resume` binary %s for %s, which the `mcp-resume` package runs. Install `mcp-resume`, not this package.\n", name, c.version, t)
		if err := writePackage(dir, pj, readme, map[string]packageFile{"bin/" + t.exe(): {exe, 0o755}}); err != nil {
			return err
		}
		if err := npmPack(dir, dest); err != nil {
			return err
		}
	}
	readme := fmt.Sprintf("# mcp-resume\n\nMCP requests that survive disconnects (%s). `npx -y mcp-resume connect URL` serves the remote MCP server at URL over stdio, for a desktop app or an IDE that launches local servers only.\n\nThis package runs the binary of its platform package (%s/<platform>-<arch>).\n", home, npmScope)
	dir := filepath.Join(work, "mcp-resume")
	if err := writePackage(dir, launcher, readme, map[string]packageFile{"bin/mcp-resume.js": {launcherJS, 0o755}}); err != nil {
		return err
	}
	return npmPack(dir, dest)
}

type packageFile struct {
	data []byte
	mode os.FileMode
}

// writePackage writes a package's directory: package.json, README.md and files.
func writePackage(dir string, pj packageJSON, readme string, files map[string]packageFile) error {
	b, err := json.MarshalIndent(pj, "", "  ")
	if err != nil {
		return err
	}
	files["package.json"] = packageFile{append(b, '\n'), 0o644}
	files["README.md"] = packageFile{[]byte(readme), 0o644}
	for name, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil { // whatever the umask
			return err
		}
	}
	return nil
}

// npmPack runs npm pack on the package in dir, writing its tarball into dest.
// It runs offline with no scripts: a package of ours needs neither.
func npmPack(dir, dest string) error {
	cmd := exec.Command("npm", "pack", "--offline", "--ignore-scripts", "--silent", "--pack-destination", dest)
	cmd.Dir = dir
	cmd.Stdout = nil
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm pack in %s: %w", dir, err)
	}
	return nil
}
