// Command reportpng makes replay/report.png, the README's picture of the
// HTML report: it writes the page of internal/reportpage, has headless
// Chromium lay it out to find its height, screenshots it whole in a
// window 1400 pixels wide, and records the page's SHA-256 beside the
// picture (report.png.sha256), which TestReportPNGCurrent checks against
// the page the code makes today. Run it after a change to the report:
//
//	cd replay && go run ./internal/reportpng
//
// The picture's pixels depend on the fonts installed; the hash does not,
// which is why the test compares the page, not the picture.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dnsrrl/rrl/replay/internal/reportpage"
)

// width is the window's width in pixels, that of the tests' renderings.
const width = 1400

func main() {
	root := flag.String("root", "..", "the repository's root `dir`ectory")
	out := flag.String("o", "report.png", "write the screenshot to this `file`, and its page's hash beside it")
	browser := flag.String("chromium", "", "the Chromium `binary` (default: chromium, chromium-browser or google-chrome on the PATH)")
	flag.Parse()
	if err := run(*root, *out, *browser); err != nil {
		fmt.Fprintln(os.Stderr, "reportpng:", err)
		os.Exit(1)
	}
}

func run(root, out, browser string) error {
	if browser == "" {
		var err error
		if browser, err = findChromium(); err != nil {
			return err
		}
	}
	page, err := reportpage.HTML(root)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "reportpng")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	height, err := pageHeight(browser, dir, page)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "report.html")
	if err := os.WriteFile(file, page, 0o644); err != nil {
		return err
	}
	shot, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if _, err := chromium(browser, dir, height, "--screenshot="+shot, "file://"+file); err != nil {
		return err
	}
	hash := filepath.Join(filepath.Dir(shot), reportpage.HashFile)
	return os.WriteFile(hash, []byte(reportpage.HashLine(page)), 0o644)
}

// measure, appended to a copy of the page, writes the page's laid-out
// height into the DOM that --dump-dom prints.
const measure = `<script>document.body.setAttribute("data-height", Math.ceil(document.documentElement.scrollHeight));</script>`

// pageHeight lays the page out in a window of the screenshot's width and
// returns its height in pixels.
func pageHeight(browser, dir string, page []byte) (int, error) {
	file := filepath.Join(dir, "measure.html")
	measured := strings.Replace(string(page), "</body>", measure+"</body>", 1)
	if err := os.WriteFile(file, []byte(measured), 0o644); err != nil {
		return 0, err
	}
	dom, err := chromium(browser, dir, 1000, "--dump-dom", "file://"+file)
	if err != nil {
		return 0, err
	}
	_, after, ok := strings.Cut(string(dom), `data-height="`)
	height, _, _ := strings.Cut(after, `"`)
	if !ok {
		return 0, fmt.Errorf("%s did not measure the page", browser)
	}
	return strconv.Atoi(height)
}

// chromium runs headless Chromium in a window width by height pixels,
// with a fresh profile and nothing fetched in the background.
func chromium(browser, dir string, height int, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	profile, err := os.MkdirTemp(dir, "profile")
	if err != nil {
		return nil, err
	}
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir=" + profile, fmt.Sprintf("--window-size=%d,%d", width, height)}
	cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", browser, args[0], err, stderr.String())
	}
	return stdout, nil
}

func findChromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium on the PATH (apt-get install chromium), and no -chromium given")
}
