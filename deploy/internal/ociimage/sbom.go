package ociimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// SBOMMediaType is the media type of the SBOM, as a layer of the referrer
// artifact and as its artifactType.
const SBOMMediaType = "application/spdx+json"

// SPDX 2.3 JSON, the subset the image's SBOM uses. Field order follows the
// specification's examples; encoding/json keeps it, so the document is
// byte-for-byte reproducible.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID                string            `json:"SPDXID"`
	Name                  string            `json:"name"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	Supplier              string            `json:"supplier"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	Checksums             []spdxChecksum    `json:"checksums,omitempty"`
	LicenseConcluded      string            `json:"licenseConcluded"`
	LicenseDeclared       string            `json:"licenseDeclared"`
	CopyrightText         string            `json:"copyrightText"`
	Comment               string            `json:"comment,omitempty"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// sbomInput is what the SBOM describes: one platform's image.
type sbomInput struct {
	Reference string // repository:version
	Version   string
	Commit    string
	Created   time.Time
	Platform  Platform
	// Executables are the programs in the image, msgx first (its digest
	// names the document).
	Executables []executable
	Debian      []debPackage
}

// executable is one program of the image.
type executable struct {
	Name      string // msgx, msgxctl
	Path      string // in the image
	Binary    []byte
	BuildInfo *debug.BuildInfo
}

const noAssertion = "NOASSERTION"

// buildSBOM writes the SPDX 2.3 document of one image: the image, the msgx
// and msgxctl executables (each with its SHA-256) and every Go module
// linked into them (from each executable's own build info, so it cannot
// drift from what was built),
// the Go standard library, and the Debian packages the base takes files
// from.
func buildSBOM(in sbomInput) ([]byte, error) {
	if len(in.Executables) == 0 {
		return nil, fmt.Errorf("building the SBOM: no executable")
	}
	sum := sha256.Sum256(in.Executables[0].Binary)
	binSum := hex.EncodeToString(sum[:])
	doc := spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              in.Reference + " " + in.Platform.String(),
		DocumentNamespace: "https://spdx.org/spdxdocs/msgx-" + in.Version + "-" + in.Platform.OS + "-" + in.Platform.Arch + "-" + binSum,
		CreationInfo: spdxCreationInfo{
			Created:  in.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: msgexchange", "Tool: msgexchange-imagebuild"},
		},
		DocumentDescribes: []string{"SPDXRef-Image"},
	}
	image := spdxPackage{
		SPDXID:                "SPDXRef-Image",
		Name:                  in.Reference,
		VersionInfo:           in.Version,
		Supplier:              "Organization: msgexchange",
		DownloadLocation:      noAssertion,
		LicenseConcluded:      noAssertion,
		LicenseDeclared:       noAssertion,
		CopyrightText:         noAssertion,
		Comment:               "container image for " + in.Platform.String() + " built from commit " + in.Commit,
		PrimaryPackagePurpose: "CONTAINER",
	}
	doc.Packages = append(doc.Packages, image)
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Image"})
	// A module linked into several executables is one package with a
	// DEPENDS_ON from each; distinct module paths that map to one
	// identifier ("a/b-c", "a-b/c") get numbered identifiers.
	modules := map[string]string{} // path@version → SPDXID
	seen := map[string]int{}
	for _, exe := range in.Executables {
		exeSum := sha256.Sum256(exe.Binary)
		pkg := spdxPackage{
			SPDXID:                "SPDXRef-Package-" + spdxIDPart(exe.Name),
			Name:                  exe.Name,
			VersionInfo:           in.Version,
			Supplier:              "Organization: msgexchange",
			DownloadLocation:      noAssertion,
			Checksums:             []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(exeSum[:])}},
			LicenseConcluded:      noAssertion,
			LicenseDeclared:       noAssertion,
			CopyrightText:         noAssertion,
			Comment:               "statically linked executable " + exe.Path + ", commit " + in.Commit,
			PrimaryPackagePurpose: "APPLICATION",
		}
		doc.Packages = append(doc.Packages, pkg)
		doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-Image", "CONTAINS", pkg.SPDXID})
		if exe.BuildInfo == nil {
			return nil, fmt.Errorf("building the SBOM: the executable %s has no Go build info", exe.Name)
		}
		bi := exe.BuildInfo
		goPkgs := []spdxPackage{goModule("stdlib", bi.GoVersion, "", "the Go standard library and runtime")}
		goPkgs = append(goPkgs, goModule(bi.Main.Path, bi.Main.Version, bi.Main.Sum, "main module"))
		for _, m := range bi.Deps {
			comment := ""
			mod := m
			if m.Replace != nil {
				comment = "replaced by " + m.Replace.Path
				if m.Replace.Version != "" {
					comment += "@" + m.Replace.Version
				}
				mod = m.Replace
				mod.Path = m.Path
			}
			goPkgs = append(goPkgs, goModule(mod.Path, mod.Version, mod.Sum, comment))
		}
		for _, p := range goPkgs {
			key := p.Name + "@" + p.VersionInfo
			id, ok := modules[key]
			if !ok {
				if n := seen[p.SPDXID]; n > 0 {
					seen[p.SPDXID]++
					p.SPDXID += "-" + strconv.Itoa(n+1)
				} else {
					seen[p.SPDXID] = 1
				}
				id = p.SPDXID
				modules[key] = id
				doc.Packages = append(doc.Packages, p)
			}
			doc.Relationships = append(doc.Relationships, spdxRelationship{pkg.SPDXID, "DEPENDS_ON", id})
		}
	}
	for _, d := range in.Debian {
		p := spdxPackage{
			SPDXID:           "SPDXRef-Package-deb-" + spdxIDPart(d.Name),
			Name:             d.Name,
			VersionInfo:      d.Version,
			Supplier:         "Organization: Debian",
			DownloadLocation: noAssertion,
			LicenseConcluded: noAssertion,
			LicenseDeclared:  noAssertion,
			CopyrightText:    noAssertion,
			Comment:          "files taken from the installed package; its copyright file is /usr/share/doc/" + d.Name + "/copyright",
			ExternalRefs: []spdxExternalRef{{
				ReferenceCategory: "PACKAGE-MANAGER",
				ReferenceType:     "purl",
				ReferenceLocator:  "pkg:deb/debian/" + d.Name + "@" + url.PathEscape(d.Version) + "?arch=" + d.Arch,
			}},
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-Image", "CONTAINS", p.SPDXID})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the SBOM: %w", err)
	}
	return append(out, '\n'), nil
}

// goModule is the SPDX package of a Go module, with its package URL and,
// where the go command recorded it, the module's go.sum hash.
func goModule(path, version, sum, comment string) spdxPackage {
	v := version
	if v == "(devel)" || v == "" {
		v = "devel"
		if comment == "" {
			comment = "built from the local source tree"
		}
	}
	if sum != "" {
		if comment != "" {
			comment += "; "
		}
		comment += "go.sum " + sum
	}
	purl := "pkg:golang/" + path + "@" + v
	if path == "stdlib" {
		purl = "pkg:golang/stdlib@" + strings.TrimPrefix(v, "go")
	}
	return spdxPackage{
		SPDXID:           "SPDXRef-Package-go-" + spdxIDPart(path),
		Name:             path,
		VersionInfo:      v,
		Supplier:         noAssertion,
		DownloadLocation: noAssertion,
		LicenseConcluded: noAssertion,
		LicenseDeclared:  noAssertion,
		CopyrightText:    noAssertion,
		Comment:          comment,
		ExternalRefs: []spdxExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER",
			ReferenceType:     "purl",
			ReferenceLocator:  purl,
		}},
	}
}

// spdxIDPart maps a name to the characters an SPDX identifier allows
// (letters, digits, '.' and '-').
func spdxIDPart(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	return b.String()
}
