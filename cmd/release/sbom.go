package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// The SPDX 2.3 document (https://spdx.github.io/spdx-spec/v2.3/) of one
// binary: the binary as the package it describes, and the Go modules linked
// into it, read from the binary's own build information, as packages it
// depends on. Its fields are written in a fixed order; its only time is the
// release's.

type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string         `json:"name"`
	SPDXID           string         `json:"SPDXID"`
	VersionInfo      string         `json:"versionInfo"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
	LicenseConcluded string         `json:"licenseConcluded"`
	LicenseDeclared  string         `json:"licenseDeclared"`
	CopyrightText    string         `json:"copyrightText"`
	PrimaryPurpose   string         `json:"primaryPackagePurpose"`
	Comment          string         `json:"comment,omitempty"`
	ExternalRefs     []spdxRef      `json:"externalRefs"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// sbom returns the SPDX JSON of the binary at bin (whose bytes are exe) built
// for t.
func (c *config) sbom(t target, bin string, exe []byte) ([]byte, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("the build information of %s: %w", bin, err)
	}
	base := c.assetBase(t)
	sum := sha256.Sum256(exe)
	main := spdxPackage{
		Name:             bi.Main.Path,
		SPDXID:           "SPDXRef-Package-mcp-resume",
		VersionInfo:      c.version,
		DownloadLocation: "git+https://" + bi.Main.Path + "@" + c.version,
		Checksums:        []spdxChecksum{{"SHA256", hex.EncodeToString(sum[:])}},
		PrimaryPurpose:   "APPLICATION",
		Comment:          fmt.Sprintf("the binary %s of %s, built for %s with %s", t.exe(), bi.Path, t, bi.GoVersion),
		ExternalRefs:     []spdxRef{purl(bi.Main.Path, c.version)},
	}
	if c.commit != "" {
		main.Comment += " from commit " + c.commit
	}
	doc := spdxDoc{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              base,
		DocumentNamespace: "https://" + bi.Main.Path + "/releases/" + c.version + "/" + base + ".spdx.json",
		CreationInfo: spdxCreation{
			Created:  c.epoch.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: mcp-resume-release-" + c.version},
		},
		Packages:      []spdxPackage{main},
		Relationships: []spdxRelationship{{"SPDXRef-DOCUMENT", "DESCRIBES", main.SPDXID}},
	}
	std := spdxPackage{
		Name:             "stdlib",
		SPDXID:           "SPDXRef-Package-stdlib",
		VersionInfo:      bi.GoVersion,
		DownloadLocation: "https://go.dev/dl/",
		PrimaryPurpose:   "LIBRARY",
		ExternalRefs:     []spdxRef{purl("stdlib", bi.GoVersion)},
	}
	deps := []spdxPackage{std}
	ids := map[string]bool{main.SPDXID: true, std.SPDXID: true}
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		p := spdxPackage{
			Name:             m.Path,
			VersionInfo:      m.Version,
			DownloadLocation: "https://proxy.golang.org/" + escapeModule(m.Path) + "/@v/" + escapeModule(m.Version) + ".zip",
			PrimaryPurpose:   "LIBRARY",
			ExternalRefs:     []spdxRef{purl(m.Path, m.Version)},
		}
		if m.Sum != "" {
			p.Comment = "go.sum hash " + m.Sum
		}
		if d.Replace != nil {
			p.Comment = strings.TrimSpace(fmt.Sprintf("replaces %s %s; %s", d.Path, d.Version, p.Comment))
		}
		p.SPDXID = "SPDXRef-Package-go-" + spdxIDPart(m.Path+"-"+m.Version)
		for id, n := p.SPDXID, 2; ids[p.SPDXID]; n++ {
			p.SPDXID = fmt.Sprintf("%s-%d", id, n)
		}
		ids[p.SPDXID] = true
		deps = append(deps, p)
	}
	for _, p := range deps {
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{main.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	for i := range doc.Packages { // the repository names no license; the modules' are not read here
		p := &doc.Packages[i]
		p.LicenseConcluded, p.LicenseDeclared, p.CopyrightText = "NOASSERTION", "NOASSERTION", "NOASSERTION"
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// purl is the package URL of a Go module (https://github.com/package-url/purl-spec,
// type golang).
func purl(path, version string) spdxRef {
	return spdxRef{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}
}

// escapeModule is a module path or version as the module proxy protocol
// writes it: each upper-case letter as ! and its lower case.
func escapeModule(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// spdxIDPart keeps what an SPDX identifier may hold (letters, digits, . and
// -) and writes - for the rest.
func spdxIDPart(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '-') {
			return r
		}
		return '-'
	}, s)
}
