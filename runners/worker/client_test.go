package worker

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// request is one call the test server saw.
type request struct {
	Method, Path, RawPath, Query, Auth, IfNoneMatch, Secret string
	Body                                                    map[string]any
}

// wireServer is an httptest server speaking the worker endpoints' wire
// format; handler answers each call and records it.
type wireServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []request
}

func newWireServer(t *testing.T, handler func(w http.ResponseWriter, r *request)) *wireServer {
	t.Helper()
	ws := &wireServer{}
	ws.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := request{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), IfNoneMatch: r.Header.Get("If-None-Match"), Secret: r.Header.Get(workerproto.SecretHeader)}
		if r.Body != nil {
			raw, _ := io.ReadAll(r.Body)
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, &req.Body); err != nil {
					http.Error(w, `{"error": "bad body"}`, http.StatusBadRequest)
					return
				}
			}
		}
		ws.mu.Lock()
		ws.seen = append(ws.seen, req)
		ws.mu.Unlock()
		handler(w, &req)
	}))
	t.Cleanup(ws.Close)
	return ws
}

func (s *wireServer) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.seen...)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func TestClientSpeaksTheWorkerEndpointsWireFormat(t *testing.T) {
	srv := newWireServer(t, func(w http.ResponseWriter, r *request) {
		switch r.Path {
		case "/worker/register":
			writeJSON(w, 200, `{"worker_id": "11111111-2222-3333-4444-555555555555", "worker_secret": "s3cr3t"}`)
		case "/worker/jobs/claim":
			writeJSON(w, 200, `{"job_id": "j-1", "workspace": "main", "revision": "abc", "step_name": "build[0]",
				"action_name": "build", "action_type": "script", "action_image": null, "runner": "local",
				"action_spec": {"type": "script", "script": "echo hi", "language": "shell", "env": {"A": "1"}},
				"input": {"n": 1}, "timeout_secs": 30}`)
		case "/worker/jobs/j-1/logs":
			writeJSON(w, 200, `{"status": "ok", "cancelled": true}`)
		case "/worker/jobs/j-1/cancelled":
			writeJSON(w, 200, `{"cancelled": true}`)
		case "/worker/claims":
			writeJSON(w, 200, `{"assignments": [{"job_id": "j-2", "workspace": "main", "revision": "abc", "step_name": "s",
				"action_name": "", "action_type": "script", "action_image": null, "runner": "local",
				"action_spec": {"type": "script", "script": "true"}, "input": {}}]}`)
		case "/worker/reports":
			writeJSON(w, 200, `{"results": [{"status": 200}]}`)
		default:
			writeJSON(w, 200, `{"status": "ok"}`)
		}
	})
	c := NewClient(srv.URL, "tok3n", nil)
	ctx := testContext(t)

	id, err := c.Register(ctx, "box", nil)
	if err != nil || id != "11111111-2222-3333-4444-555555555555" {
		t.Fatalf("register: %q %v", id, err)
	}
	if err := c.Heartbeat(ctx, id, []StepRef{{JobID: "j-1", Step: "build[0]"}}); err != nil {
		t.Fatal(err)
	}
	a, err := c.Claim(ctx, id, []string{"gpu"})
	if err != nil || a == nil {
		t.Fatalf("claim: %+v %v", a, err)
	}
	if a.JobID != "j-1" || a.StepName != "build[0]" || a.Revision != "abc" || a.TimeoutSecs != 30 ||
		a.ActionSpec.Script != "echo hi" || a.ActionSpec.Env["A"] != "1" || a.Input["n"] != 1.0 || a.ActionImage != nil {
		t.Fatalf("assignment decoded as %+v (spec %+v)", a, a.ActionSpec)
	}
	if err := c.Start(ctx, id, "j-1", "build[0]"); err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cancelled, err := c.PushLogs(ctx, "j-1", LogPush{WorkerID: id, StepName: "build[0]", Run: "r1", Lines: []LogLine{{Seq: 1, TS: ts, Stream: "stdout", Line: "hi"}}})
	if err != nil || !cancelled {
		t.Fatalf("push logs: cancelled=%v err=%v", cancelled, err)
	}
	if cancelled, err := c.Cancelled(ctx, "j-1", 30*time.Second); err != nil || !cancelled {
		t.Fatalf("cancelled: %v %v", cancelled, err)
	}
	msg := "Exit code: 2\nboom"
	if err := c.Complete(ctx, id, "j-1", "build[0]", Result{ExitCode: 2, Error: &msg}); err != nil {
		t.Fatal(err)
	}
	if as, err := c.ClaimSteps(ctx, id, 3); err != nil || len(as) != 1 || as[0].JobID != "j-2" || as[0].ActionSpec.Script != "true" {
		t.Fatalf("claim steps: %+v %v", as, err)
	}

	want := []request{
		{Method: "POST", Path: "/worker/register", Body: map[string]any{"name": "box", "tags": []any{}, "want_secret": true}},
		{Method: "POST", Path: "/worker/heartbeat", Body: map[string]any{"worker_id": id,
			"running": []any{map[string]any{"job_id": "j-1", "step_name": "build[0]"}}}},
		{Method: "POST", Path: "/worker/jobs/claim", Query: "wait=20", Body: map[string]any{"worker_id": id, "tags": []any{"gpu"}}},
		{Method: "POST", Path: "/worker/jobs/j-1/steps/build[0]/start", RawPath: "/worker/jobs/j-1/steps/build%5B0%5D/start",
			Body: map[string]any{"worker_id": id}},
		{Method: "POST", Path: "/worker/jobs/j-1/logs", Body: map[string]any{"worker_id": id, "step_name": "build[0]", "run": "r1",
			"lines": []any{map[string]any{"seq": 1.0, "ts": "2025-01-02T03:04:05Z", "stream": "stdout", "line": "hi"}}}},
		{Method: "GET", Path: "/worker/jobs/j-1/cancelled", Query: "wait=30"},
		{Method: "POST", Path: "/worker/reports", Body: map[string]any{"results": []any{map[string]any{
			"job_id": "j-1", "step_name": "build[0]", "worker_id": id, "output": nil, "exit_code": 2.0, "error": msg}}}},
		{Method: "POST", Path: "/worker/claims", Query: "wait=20", Body: map[string]any{"worker_id": id, "max": 3.0}},
	}
	got := srv.requests()
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Auth != "Bearer tok3n" {
			t.Errorf("%s: Authorization %q", g.Path, g.Auth)
		}
		// Every call after the registration proves the worker, those that
		// name none (the cancellation long-poll) too.
		if wantSecret := map[bool]string{true: "", false: "s3cr3t"}[i == 0]; g.Secret != wantSecret {
			t.Errorf("%s: %s %q, want %q", g.Path, workerproto.SecretHeader, g.Secret, wantSecret)
		}
		if w.RawPath == "" {
			w.RawPath = w.Path
		}
		if g.Method != w.Method || g.Path != w.Path || g.RawPath != w.RawPath || g.Query != w.Query || !reflect.DeepEqual(g.Body, w.Body) {
			t.Errorf("request %d:\n got %s %s (%s) ?%s %v\nwant %s %s (%s) ?%s %v", i,
				g.Method, g.Path, g.RawPath, g.Query, g.Body, w.Method, w.Path, w.RawPath, w.Query, w.Body)
		}
	}
}

func TestClaimWithoutWorkReturnsNil(t *testing.T) {
	srv := newWireServer(t, func(w http.ResponseWriter, r *request) {
		writeJSON(w, 200, `{"job_id": null, "step_name": null, "action_spec": null}`)
	})
	a, err := NewClient(srv.URL, "t", nil).Claim(testContext(t), "w", nil)
	if a != nil || err != nil {
		t.Fatalf("claim = %+v, %v; want nil, nil", a, err)
	}
}

func TestErrorAnswersBecomeProtocolErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		call     func(c *Client) error
		sentinel error
		text     string
	}{
		{"heartbeat of a forgotten worker", 404, func(c *Client) error { return c.Heartbeat(context.Background(), "w", nil) },
			ErrUnknownWorker, "heartbeat: server answered 404: the message"},
		{"claim by a forgotten worker", 404, func(c *Client) error { _, err := c.Claim(context.Background(), "w", nil); return err },
			ErrUnknownWorker, "claim: server answered 404: the message"},
		{"late completion", 409, func(c *Client) error { return c.Complete(context.Background(), "w", "j", "s", Result{}) },
			ErrConflict, "complete step: server answered 409: the message"},
		{"start of an unknown step", 404, func(c *Client) error { return c.Start(context.Background(), "w", "j", "s") },
			ErrNotFound, "start step: server answered 404: the message"},
		{"another worker's report", 403, func(c *Client) error { return c.Start(context.Background(), "w", "j", "s") },
			ErrForbidden, "start step: server answered 403: the message"},
		{"wrong token", 401, func(c *Client) error { _, err := c.Register(context.Background(), "n", nil); return err },
			ErrUnauthorized, "register: server answered 401: the message"},
		{"server failure", 500, func(c *Client) error {
			_, err := c.PushLogs(context.Background(), "j", LogPush{WorkerID: "w", StepName: "s"})
			return err
		},
			nil, "push logs: server answered 500: the message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWireServer(t, func(w http.ResponseWriter, r *request) {
				if r.Path == "/worker/reports" { // answered item by item
					writeJSON(w, 200, fmt.Sprintf(`{"results": [{"status": %d, "error": "the message"}]}`, tc.status))
					return
				}
				writeJSON(w, tc.status, `{"error": "the message"}`)
			})
			err := tc.call(NewClient(srv.URL, "t", nil))
			var se *StatusError
			if !errors.As(err, &se) || se.Status != tc.status || err.Error() != tc.text {
				t.Fatalf("error %v, want %q", err, tc.text)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Fatalf("error %v is not %v", err, tc.sentinel)
			}
			if tc.sentinel == nil && permanent(err) {
				t.Fatalf("a %d answer should be retried", tc.status)
			}
		})
	}
}

func TestUnreachableServerIsATransientError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	err := NewClient(url, "t", nil).Heartbeat(testContext(t), "w", nil)
	if err == nil || permanent(err) {
		t.Fatalf("error %v, want a transient one", err)
	}
	if err := NewClient("ftp://x", "t", nil).Heartbeat(testContext(t), "w", nil); err == nil || !strings.Contains(err.Error(), "want http(s)://") {
		t.Fatalf("bad server url gave %v", err)
	}
}

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func tarball(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// tarServer serves workspace tarballs by revision, honouring If-None-Match,
// and counts full downloads.
type tarServer struct {
	*wireServer
	mu        sync.Mutex
	current   string
	archives  map[string][]byte
	downloads int
	gate      chan struct{} // when set, downloads wait for it
}

func newTarServer(t *testing.T, current string, archives map[string][]byte) *tarServer {
	ts := &tarServer{current: current, archives: archives}
	ts.wireServer = newWireServer(t, func(w http.ResponseWriter, r *request) {
		if r.Path != "/worker/workspace/main.tar.gz" {
			writeJSON(w, 404, `{"error": "unknown workspace"}`)
			return
		}
		ts.mu.Lock()
		rev, gate := ts.current, ts.gate
		ts.mu.Unlock()
		// Like the real server: ?revision= asks for one still available.
		if want := strings.TrimPrefix(r.Query, "revision="); want != "" {
			if _, ok := ts.archives[want]; !ok {
				writeJSON(w, 404, `{"error": "revision not available"}`)
				return
			}
			rev = want
		}
		if r.IfNoneMatch == `"`+rev+`"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if gate != nil {
			<-gate
		}
		ts.mu.Lock()
		ts.downloads++
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/gzip")
		w.Header().Set("X-Revision", rev)
		w.Header().Set("ETag", `"`+rev+`"`)
		w.Write(ts.archives[rev])
	})
	return ts
}

func (ts *tarServer) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.downloads
}

func TestWorkspaceIsDownloadedOnceThenServedFromCache(t *testing.T) {
	archive := tarball(t,
		tarEntry{name: "./", typ: tar.TypeDir},
		tarEntry{name: ".workflows/main.yaml", body: "tasks: {}\n"},
		tarEntry{name: "scripts/run.sh", body: "#!/bin/sh\necho ran\n", mode: 0o755},
		tarEntry{name: "scripts/latest.sh", typ: tar.TypeSymlink, link: "run.sh"},
		tarEntry{name: "empty", typ: tar.TypeDir},
		tarEntry{name: "fifo", typ: tar.TypeFifo},
	)
	ts := newTarServer(t, "rev1", map[string][]byte{"rev1": archive})
	cache := t.TempDir()
	c := NewClient(ts.URL, "t", nil, WithWorkspaceCache(cache))

	dir, err := c.Workspace(testContext(t), "main", "rev1")
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(cache, "main", "rev1") {
		t.Fatalf("dir %s", dir)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "scripts", "latest.sh")); string(b) != "#!/bin/sh\necho ran\n" {
		t.Fatalf("symlinked script reads %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dir, "scripts", "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("executable bit lost: %v %v", fi.Mode(), err)
	}
	if !isDir(filepath.Join(dir, "empty")) {
		t.Fatal("empty directory not created")
	}
	if _, err := os.Lstat(filepath.Join(dir, "fifo")); !os.IsNotExist(err) {
		t.Fatalf("a fifo entry was created: %v", err)
	}

	again, err := c.Workspace(testContext(t), "main", "rev1")
	if err != nil || again != dir {
		t.Fatalf("second call: %s %v", again, err)
	}
	reqs := ts.requests()
	if ts.count() != 1 || len(reqs) != 1 || reqs[0].IfNoneMatch != "" || reqs[0].Query != "revision=rev1" || reqs[0].Auth != "Bearer t" {
		t.Fatalf("%d downloads, requests %+v; want one download, and the cached revision served without asking", ts.count(), reqs)
	}
	// A revision not cached is asked for with the newest cached one: the
	// server answers 304 when that is what it would send.
	if again, err := c.Workspace(testContext(t), "main", ""); err != nil || again != dir {
		t.Fatalf("current revision: %s %v", again, err)
	}
	if reqs := ts.requests(); ts.count() != 1 || len(reqs) != 2 || reqs[1].IfNoneMatch != `"rev1"` {
		t.Fatalf("%d downloads, requests %+v; want a 304 for the current revision, cached", ts.count(), reqs)
	}
}

func TestConcurrentWorkspaceCallsDownloadOnce(t *testing.T) {
	ts := newTarServer(t, "rev1", map[string][]byte{"rev1": tarball(t, tarEntry{name: "a.txt", body: "a"})})
	ts.gate = make(chan struct{})
	c := NewClient(ts.URL, "t", nil, WithWorkspaceCache(t.TempDir()))
	const n = 8
	dirs := make(chan string, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			d, err := c.Workspace(testContext(t), "main", "rev1")
			dirs <- d
			errs <- err
		}()
	}
	// Let the first download finish only once every caller is waiting.
	eventually(t, 10*time.Second, "a download to begin", func() bool { return len(ts.requests()) == 1 })
	close(ts.gate)
	first := ""
	for range n {
		d := <-dirs
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = d
		}
		if d != first {
			t.Fatalf("callers got different dirs: %s and %s", first, d)
		}
	}
	if ts.count() != 1 {
		t.Fatalf("%d downloads for %d concurrent callers, want 1", ts.count(), n)
	}
}

func TestMaliciousArchivesAreRejected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{"parent traversal", []tarEntry{{name: "ok.txt", body: "x"}, {name: "../evil", body: "x"}},
			`entry "../evil" escapes the workspace directory`},
		{"nested traversal", []tarEntry{{name: "a/../../evil", body: "x"}}, `entry "a/../../evil" escapes`},
		{"absolute path", []tarEntry{{name: "/tmp/evil", body: "x"}}, `entry "/tmp/evil" is an absolute path`},
		{"symlink escaping", []tarEntry{{name: "sub/link", typ: tar.TypeSymlink, link: "../../outside"}},
			`symlink "sub/link" points outside the workspace`},
		{"absolute symlink", []tarEntry{{name: "link", typ: tar.TypeSymlink, link: "/etc"}},
			`symlink "link" points outside the workspace`},
		{"symlink chain climbing out", []tarEntry{
			{name: "x", typ: tar.TypeDir},
			{name: "self", typ: tar.TypeSymlink, link: "."},
			{name: "up", typ: tar.TypeSymlink, link: "self/x/../.."},
		}, `symlink "up" points outside the workspace`},
		{"traversal through a symlinked dir", []tarEntry{
			{name: "dir", typ: tar.TypeSymlink, link: "."},
			{name: "dir/../../evil", body: "x"},
		}, `escapes the workspace directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTarServer(t, "rev1", map[string][]byte{"rev1": tarball(t, tc.entries...)})
			base := t.TempDir()
			cache := filepath.Join(base, "cache")
			c := NewClient(ts.URL, "t", nil, WithWorkspaceCache(cache))
			_, err := c.Workspace(testContext(t), "main", "rev1")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(base, "evil")); !os.IsNotExist(err) {
				t.Fatal("a file was written outside the cache")
			}
			if revs := cachedRevisions(filepath.Join(cache, "main")); len(revs) != 0 {
				t.Fatalf("a rejected archive left a cached revision: %v", revs)
			}
			if entries, _ := os.ReadDir(filepath.Join(cache, "main")); len(entries) != 0 {
				t.Fatalf("a rejected archive left files behind: %v", entries)
			}
		})
	}
}

func TestJobKeepsItsRevisionWhenServerMovedOn(t *testing.T) {
	ts := newTarServer(t, "rev1", map[string][]byte{
		"rev1": tarball(t, tarEntry{name: "v", body: "1"}),
		"rev2": tarball(t, tarEntry{name: "v", body: "2"}),
	})
	c := NewClient(ts.URL, "t", nil, WithWorkspaceCache(t.TempDir()))
	ctx := testContext(t)
	if _, err := c.Workspace(ctx, "main", "rev1"); err != nil {
		t.Fatal(err)
	}
	ts.mu.Lock()
	ts.current = "rev2"
	ts.mu.Unlock()
	for _, tc := range []struct{ ask, want string }{
		{"rev1", "1"}, // cached: the job runs the revision it was created on
		{"rev2", "2"},
		{"", "2"},
		{"rev0", "2"}, // gone from the server: its current files are next best
	} {
		dir, err := c.Workspace(ctx, "main", tc.ask)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "v")); string(b) != tc.want {
			t.Errorf("asking for %q read %q, want %q", tc.ask, b, tc.want)
		}
	}
	if ts.count() != 2 {
		t.Fatalf("%d downloads, want 2", ts.count())
	}
	for _, r := range ts.requests()[1:] {
		if r.IfNoneMatch == "" {
			t.Errorf("request %s?%s without If-None-Match though revisions were cached", r.Path, r.Query)
		}
	}
}

func TestOldRevisionsArePruned(t *testing.T) {
	archives := map[string][]byte{}
	for _, r := range []string{"r1", "r2", "r3", "r4", "r5"} {
		archives[r] = tarball(t, tarEntry{name: "f", body: r})
	}
	ts := newTarServer(t, "r1", archives)
	cache := t.TempDir()
	c := NewClient(ts.URL, "t", nil, WithWorkspaceCache(cache))
	for i, r := range []string{"r1", "r2", "r3", "r4", "r5"} {
		ts.mu.Lock()
		ts.current = r
		ts.mu.Unlock()
		if _, err := c.Workspace(testContext(t), "main", r); err != nil {
			t.Fatal(err)
		}
		// Distinct use times, whatever the file system's timestamp precision.
		past := time.Now().Add(time.Duration(i-10) * time.Minute)
		os.Chtimes(filepath.Join(cache, "main", r), past, past)
	}
	var names []string
	for _, r := range cachedRevisions(filepath.Join(cache, "main")) {
		names = append(names, r.name)
	}
	if strings.Join(names, ",") != "r5,r4,r3" {
		t.Fatalf("cached revisions %v, want the newest %d", names, keepRevisions)
	}
}

func TestWorkspaceNamesCannotEscapeTheCache(t *testing.T) {
	c := NewClient("http://127.0.0.1:1", "t", nil, WithWorkspaceCache(t.TempDir()))
	for _, ws := range []string{"../x", "a/b", "", ".hidden"} {
		if _, err := c.Workspace(testContext(t), ws, "r"); err == nil || !strings.Contains(err.Error(), "invalid workspace name") {
			t.Errorf("workspace %q: %v", ws, err)
		}
	}
	if _, err := c.Workspace(testContext(t), "main", "../r"); err == nil || !strings.Contains(err.Error(), "invalid revision name") {
		t.Errorf("revision ../r: %v", err)
	}
}
