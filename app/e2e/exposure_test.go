package e2e

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

func TestServeWithTheOptInStartsAndWarns(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--listen", "0.0.0.0:0", "--insecure-no-auth",
		"--data-dir", filepath.Join(dir, "data"), "--workspace", "../../examples", "--workers", "0")
	cmd.Env = append(cmd.Environ(), "TMPDIR="+dir)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var settings []string
	timeout := time.After(20 * time.Second)
	for len(settings) == 0 || !strings.HasPrefix(settings[len(settings)-1], "  insecure_no_auth:") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve ended; printed %q; stderr: %s", settings, stderr.String())
			}
			settings = append(settings, l)
		case <-timeout:
			t.Fatalf("no insecure_no_auth line in the settings %q; stderr: %s", settings, stderr.String())
		}
	}
	first := settings[0]
	_, port, err := net.SplitHostPort(first[strings.LastIndex(first, "http://")+len("http://"):])
	if err != nil {
		t.Fatalf("serving line %q: %v", first, err)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/api/config")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/config: %d", resp.StatusCode)
	}
	log := stderr.String()
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "insecure_no_auth") || !strings.Contains(log, "anyone who can reach") {
		t.Errorf("no start-up warning in the log:\n%s", log)
	}
	if !strings.Contains(settings[len(settings)-1], "WARNING") {
		t.Errorf("settings line %q", settings[len(settings)-1])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
}

// Clients that open connections and send half a header (slowloris) are cut
// off after the header timeout, and meanwhile the server answers everyone
// else at once.
func TestSlowHeaderClientsAreCutOffWhileOthersAreServed(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 2,000 connections; skipped with -short")
	}
	const (
		slowClients   = 2000
		headerTimeout = 2 * time.Second
	)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 0, func(c *config.Server) { c.Test.HeaderTimeout = headerTimeout })
	addr := strings.TrimPrefix(f.url, "http://")

	type slow struct {
		conn   net.Conn
		opened time.Time
	}
	conns := make([]slow, slowClients)
	var wg sync.WaitGroup
	errs := make(chan error, slowClients)
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < slowClients; i += 50 {
				// Taken before the dial: the server's header timeout starts
				// once it reads the connection, which is never earlier,
				// while this goroutine may see the dial return (and read the
				// clock) long after the server began reading, under load.
				opened := time.Now()
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				if _, err := io.WriteString(c, "GET /api/config HTTP/1.1\r\nHost: "+addr+"\r\nX-Slow: "); err != nil {
					errs <- err
					return
				}
				conns[i] = slow{c, opened}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("open a slow connection: %v", err)
	}
	t.Cleanup(func() {
		for _, s := range conns {
			s.conn.Close()
		}
	})

	// A normal client, each request on a new connection.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var took []time.Duration
	for range 7 {
		start := time.Now()
		resp, err := client.Get(f.url + "/api/config")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took = append(took, time.Since(start))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	slices.Sort(took)
	median := took[len(took)/2]
	t.Logf("with %d slow connections open, a request took %v (median of %d; min %v, max %v)", slowClients, median, len(took), took[0], took[len(took)-1])
	if median > 100*time.Millisecond {
		t.Errorf("median request time %v with slow clients holding connections, want under 100ms", median)
	}

	// Every slow connection is closed by the server, once its header
	// timeout has passed.
	closedAfter := make([]time.Duration, slowClients)
	var failures sync.Map
	for i, s := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.conn.SetReadDeadline(s.opened.Add(headerTimeout + 20*time.Second))
			_, err := io.Copy(io.Discard, s.conn) // until the server closes it
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				failures.Store(i, "still open 20s after the header timeout")
				return
			}
			closedAfter[i] = time.Since(s.opened)
		}()
	}
	wg.Wait()
	n := 0
	failures.Range(func(k, v any) bool {
		if n < 5 {
			t.Errorf("slow connection %v: %v", k, v)
		}
		n++
		return true
	})
	if n > 0 {
		t.Fatalf("%d of %d slow connections were never closed", n, slowClients)
	}
	slices.Sort(closedAfter)
	t.Logf("slow connections closed after %v to %v (header timeout %v)", closedAfter[0], closedAfter[len(closedAfter)-1], headerTimeout)
	if closedAfter[0] < headerTimeout-500*time.Millisecond {
		t.Errorf("a slow connection was closed after %v, before the header timeout %v", closedAfter[0], headerTimeout)
	}
}
