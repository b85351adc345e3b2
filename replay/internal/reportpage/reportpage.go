// Package reportpage makes the HTML report that replay/report.png shows:
// the README's first example, the generated sample capture replayed with
// testdata/Corefile and requests-per-second 20. The screenshot program
// (internal/reportpng) and the test that report.png is current both make
// the page here, so that they cannot differ in what they replay.
package reportpage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/dnsrrl/rrl/replay"
)

// Command is the rrl-replay command line, from the repository's root,
// that writes the same page.
const Command = "rrl-replay -corefile replay/testdata/Corefile -set requests-per-second=20 -top 3 -html report.html replay/testdata/sample.pcap"

// HashFile is the file, beside report.png, that records the SHA-256 of
// the page the screenshot was taken of, in the format of sha256sum.
const HashFile = "report.png.sha256"

// HTML returns the page, replayed from the repository at root.
func HTML(root string) ([]byte, error) {
	opts, err := options(root)
	if err != nil {
		return nil, err
	}
	r, err := replay.New(opts)
	if err != nil {
		return nil, err
	}
	if err := r.ReadFile(filepath.Join(root, "replay/testdata/sample.pcap")); err != nil {
		return nil, err
	}
	var page bytes.Buffer
	if err := replay.WriteHTML(&page, r.Reports()); err != nil {
		return nil, err
	}
	return page.Bytes(), nil
}

// options are Command's: the Corefile's settings, zones and zone data
// (its paths are relative to the repository's root, as CoreDNS would read
// them run from there), then requests-per-second 20, and the top three.
func options(root string) (replay.Options, error) {
	name := filepath.Join(root, "replay/testdata/Corefile")
	f, err := os.Open(name)
	if err != nil {
		return replay.Options{}, err
	}
	defer f.Close()
	cf, err := replay.ParseCorefile(name, f)
	if err != nil {
		return replay.Options{}, err
	}
	for i, z := range cf.ZoneFiles {
		if !filepath.IsAbs(z.Path) {
			cf.ZoneFiles[i].Path = filepath.Join(root, z.Path)
		}
	}
	zones, err := cf.ReadZones()
	if err != nil {
		return replay.Options{}, err
	}
	set, err := replay.ParseSetting("requests-per-second=20")
	if err != nil {
		return replay.Options{}, err
	}
	return replay.Options{Settings: append(cf.Settings, set), Zones: cf.Zones, ZoneData: zones,
		CookieSecrets: cf.CookieSecrets, ServerPort: 53, Top: 3}, nil
}

// HashLine is the line of HashFile for page.
func HashLine(page []byte) string {
	sum := sha256.Sum256(page)
	return hex.EncodeToString(sum[:]) + "  report.html\n"
}
