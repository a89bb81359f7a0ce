package web_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// browser finds Chromium; without one the test skips, or fails when CI=true.
func browser(t *testing.T) chromedp.ExecAllocatorOption {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return chromedp.ExecPath(p)
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium, chromium-browser or google-chrome on PATH, and CI=true: install it (make browser)")
	}
	t.Skip("no chromium, chromium-browser or google-chrome on PATH (make browser installs chromium)")
	return nil
}
