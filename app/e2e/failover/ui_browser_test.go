package failover_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// newTab starts a headless Chromium tab, failing the test on any uncaught
// exception of its pages. Without Chromium the test skips, unless
// APPLIANCE_REQUIRE_BROWSER=1 (as app/e2e's browser tests do).
func newTab(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("APPLIANCE_REQUIRE_BROWSER") == "1" {
			t.Fatal("no Chromium binary found and APPLIANCE_REQUIRE_BROWSER=1")
		}
		t.Skip("no Chromium binary found; install chromium to run the browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var mu sync.Mutex
	var errs []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() {
				mu.Lock()
				errs = append(errs, m.String())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range errs {
			t.Errorf("browser console: %s", e)
		}
	})
	return ctx
}

// headerSays waits until the page's header shows want.
func headerSays(ctx context.Context, t *testing.T, timeout time.Duration, want string) {
	t.Helper()
	js, _ := json.Marshal(want)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := chromedp.Do(cctx, chromedp.Poll[chromedp.Void]("(document.querySelector('header')?.innerText ?? '').includes("+string(js)+")",
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
	if err != nil {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		text, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`document.querySelector('header')?.innerText ?? ''`))
		t.Fatalf("the header does not say %q within %s: %v; it says %q", want, timeout, err, text)
	}
}

// TestBrowserHeaderShowsTheReplicaAndItsLeader opens the UI on each
// replica of a pair: the header names the replica answering and whether
// it leads or follows whom; after a kill -9 of the leader, the page left
// open on the follower shows it leading, without a reload.
func TestBrowserHeaderShowsTheReplicaAndItsLeader(t *testing.T) {
	ctx := newTab(t)
	p := newPair(t, "tasks:\n  hello:\n    flow:\n      hi:\n        type: script\n        script: echo hi\n")
	a := p.start("a", 1)
	waitFor(t, 10*time.Second, "replica a to lead", a.leads)
	b := p.start("b", 1)
	waitFor(t, 5*time.Second, "replica b to follow a", func() bool {
		st, err := b.status()
		return err == nil && !st.Leading && st.Leader == a.url
	})
	hostA, hostB := strings.TrimPrefix(a.url, "http://"), strings.TrimPrefix(b.url, "http://")

	if err := chromedp.Do(ctx, chromedp.Navigate(a.url+"/")); err != nil {
		t.Fatal(err)
	}
	headerSays(ctx, t, 10*time.Second, "replica "+hostA+" · leader")
	if err := chromedp.Do(ctx, chromedp.Navigate(b.url+"/")); err != nil {
		t.Fatal(err)
	}
	headerSays(ctx, t, 10*time.Second, "replica "+hostB+" · follower of "+hostA)

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	waitFor(t, lease+renew+5*time.Second, "replica b to lead", b.leads)
	headerSays(ctx, t, 10*time.Second, "replica "+hostB+" · leader")
}
