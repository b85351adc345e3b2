package replay_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
)

func sweepReports(t *testing.T) []*replay.Report {
	t.Helper()
	capture := pcapOf(t, ethernet, false, traffic(t, 30, 100, 0.3, 0.1))
	sw, _ := replay.ParseSweep("responses-per-second=1,2,5,10")
	r, _ := replay.New(replay.Options{Sweep: sw})
	if err := r.Read(bytesReader(capture)); err != nil {
		t.Fatal(err)
	}
	return r.Reports()
}

// The page stands alone: no script, no style sheet, image or font fetched.
func TestHTMLSelfContained(t *testing.T) {
	var buf bytes.Buffer
	reports := sweepReports(t)
	if err := replay.WriteHTML(&buf, reports); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "src=", "href=", "url(", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page has %q", bad)
		}
	}
	if n, want := strings.Count(page, "<svg"), charts(reports); n != want {
		t.Errorf("%d charts, want %d", n, want)
	}
	if !strings.Contains(page, "Share of responses limited, by responses-per-second") || !strings.Contains(page, "Responses per second to 198.51.100.0/24") {
		t.Error("a chart is missing")
	}
}

// charts is the number of charts the page of reports has: for a sweep,
// the sweep's; then for each report the overall one and one per network
// followed.
func charts(reports []*replay.Report) int {
	n := 0
	if len(reports) > 1 {
		n++
	}
	for _, r := range reports {
		n += 1 + len(r.Timeline.Networks)
	}
	return n
}

// chromium returns a headless Chromium or Chrome, or skips the test.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium installed (apt-get install chromium): the page is not checked in a browser")
	return ""
}

// Headless Chromium renders the page: its DOM has the charts with their
// lines, and the screenshot shows the green and red of the series.
func TestHTMLInChromium(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	reports := sweepReports(t)
	if err := replay.WriteHTML(&buf, reports); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1200,1400"}
	dom, err := exec.CommandContext(ctx, browser, append(args, "--dump-dom", "file://"+page)...).Output()
	if err != nil {
		t.Fatalf("%s --dump-dom: %v", browser, err)
	}
	want := charts(reports)
	if n := len(regexp.MustCompile(`<svg[^>]*class="chart"`).FindAll(dom, -1)); n != want {
		t.Errorf("rendered DOM has %d charts, want %d", n, want)
	}
	if n := strings.Count(string(dom), "<polyline"); n < want {
		t.Errorf("rendered DOM has %d lines", n)
	}
	shot := filepath.Join(dir, "report.png")
	if d := os.Getenv("RRL_REPLAY_SCREENSHOT"); d != "" {
		shot = d // keep it to look at
	}
	cmd := exec.CommandContext(ctx, browser, append(args, "--screenshot="+shot, "file://"+page)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s --screenshot: %v\n%s", browser, err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if !hasColor(img, 0x2a, 0x9d, 0x46) || !hasColor(img, 0xd6, 0x27, 0x28) {
		t.Error("the screenshot shows no green or no red line")
	}
}

// hasColor reports whether some pixel of img is close to the colour.
func hasColor(img image.Image, r, g, b uint8) bool {
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -24 && d < 24 }
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, r) && near(pg, g) && near(pb, b) {
				return true
			}
		}
	}
	return false
}
