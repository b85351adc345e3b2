package replay_test

import (
	"image/png"
	"os"
	"testing"

	"github.com/dnsrrl/rrl/replay/internal/reportpage"
)

// report.png shows the page the code makes today: the SHA-256 recorded
// beside it when internal/reportpng took it is that of the page made now.
// A change to the report fails here until the picture is taken again
// (cd replay && go run ./internal/reportpng). The page is compared, not
// the picture, whose pixels depend on the fonts installed.
func TestReportPNGCurrent(t *testing.T) {
	page, err := reportpage.HTML("..")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := os.ReadFile(reportpage.HashFile)
	if err != nil {
		t.Fatalf("%v: make report.png with: cd replay && go run ./internal/reportpng", err)
	}
	if got := reportpage.HashLine(page); string(recorded) != got {
		t.Errorf("report.png is of another page (%s %q, the page now %q): make it again with: cd replay && go run ./internal/reportpng",
			reportpage.HashFile, recorded, got)
	}
	f, err := os.Open("report.png")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != 1400 || cfg.Height < 1000 {
		t.Errorf("report.png: %v, %dx%d; want a whole page 1400 pixels wide", err, cfg.Width, cfg.Height)
	}
}
