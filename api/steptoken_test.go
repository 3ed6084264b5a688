package api_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/runners/pod"
	"github.com/appliance-sh/appliance/runners/worker"
)

// movableClock is the API's clock, moved by the test.
type movableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *movableClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *movableClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestStepTokenDownloadsOnlyItsRevisionWhileTheStepRuns: the token a
// worker mints for a pod's init container downloads that job's workspace
// revision, nothing else, and only while the step runs.
func TestStepTokenDownloadsOnlyItsRevisionWhileTheStepRuns(t *testing.T) {
	f := newFixture(t)
	w := f.register("pod-worker")
	job := f.execute("pod")
	f.claimStep(w, job, "say")
	tokenPath := "/worker/jobs/" + job + "/steps/say/workspace-token"

	f.worker("POST", "/worker/jobs/"+job+"/steps/say/start", map[string]any{"worker_id": w}).expect(200)
	m := f.worker("POST", tokenPath, map[string]any{"worker_id": w}).expect(200).object()
	tok, _ := m["token"].(string)
	if tok == "" || m["expires_at"] == nil {
		t.Fatalf("mint answered %v", m)
	}
	rev := f.api("GET", "/api/jobs/"+job, nil).expect(200).object()["revision"].(string)
	get := func(path string, token string) response {
		return f.do("GET", path, nil, map[string]string{"Authorization": "Bearer " + token})
	}
	get("/worker/workspace/main.tar.gz?revision="+rev, tok).expect(200)

	// The remote worker's client mints the same kind of token.
	client := worker.NewClient(f.url, workerToken, nil)
	client.Remember(w, f.secret(w))
	viaClient, err := client.StepToken(context.Background(), w, job, "say")
	if err != nil || !strings.HasPrefix(viaClient, "apst_") {
		t.Fatalf("client StepToken = %q, %v", viaClient, err)
	}
	get("/worker/workspace/main.tar.gz?revision="+rev, viaClient).expect(200)

	// What the pod's init container (appliance fetch-workspace) does with it.
	dir := filepath.Join(t.TempDir(), "workspace")
	files := filepath.Join(t.TempDir(), "files")
	init := pod.PodInit{FilesDir: files, InputJSON: `{"name":"pod"}`, ScriptFile: "/.appliance/script.sh", Script: "echo hi\n",
		ServerURL: f.url, Token: tok, Workspace: "main", Revision: rev, Dir: dir}
	if err := init.Prepare(context.Background(), worker.DefaultWorkspaceLimits); err != nil {
		t.Fatalf("fetch-workspace: %v", err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "scripts", "run.sh"): "#!/bin/sh\necho run\n",
		filepath.Join(files, "input.json"):      `{"name":"pod"}`,
		filepath.Join(files, "script.sh"):       "echo hi\n",
	} {
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	get("/worker/workspace/broken.tar.gz?revision="+rev, tok).expectError(403, "workspace main only")
	get("/worker/workspace/main.tar.gz?revision=other", tok).expectError(403, "revision "+rev)
	get("/worker/workspace/main.tar.gz", tok).expectError(403, "revision "+rev)
	get("/worker/workspace/main.tar.gz?revision="+rev, tok+"x").expectError(401, "invalid workspace token")
	// It opens nothing else of the worker protocol.
	f.do("POST", "/worker/register", map[string]any{"name": "x", "tags": []string{}},
		map[string]string{"Authorization": "Bearer " + tok}).expectError(401, "invalid worker token")

	// Another worker cannot mint one for the step, nor anyone for an unknown step.
	other := f.register("other")
	f.worker("POST", tokenPath, map[string]any{"worker_id": other}).expect(409)
	f.worker("POST", "/worker/jobs/"+job+"/steps/nope/workspace-token", map[string]any{"worker_id": w}).expect(404)
	f.worker("POST", tokenPath, map[string]any{}).expectError(400, "worker_id is required")

	// Once the step ends the token is refused.
	f.worker("POST", "/worker/jobs/"+job+"/steps/say/complete", map[string]any{
		"worker_id": w, "output": map[string]any{}, "exit_code": 0, "error": nil,
	}).expect(200)
	get("/worker/workspace/main.tar.gz?revision="+rev, tok).expectError(401, "its step is not running")
}

func TestStepTokenExpires(t *testing.T) {
	clock := &movableClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	f := newFixture(t, func(c *fixtureConfig) { c.Now = clock.now })
	w := f.register("pod-worker")
	job := f.execute("pod")
	f.claimStep(w, job, "say")
	f.worker("POST", "/worker/jobs/"+job+"/steps/say/start", map[string]any{"worker_id": w}).expect(200)
	tok := f.worker("POST", "/worker/jobs/"+job+"/steps/say/workspace-token", map[string]any{"worker_id": w}).
		expect(200).object()["token"].(string)
	rev := f.api("GET", "/api/jobs/"+job, nil).expect(200).object()["revision"].(string)
	path := "/worker/workspace/main.tar.gz?revision=" + rev
	f.do("GET", path, nil, map[string]string{"Authorization": "Bearer " + tok}).expect(200)
	clock.add(16 * time.Minute)
	f.do("GET", path, nil, map[string]string{"Authorization": "Bearer " + tok}).expectError(401, "workspace token expired")
}

// jobRecordOnly is the engine without Job, which reads every step record
// of a job: a pod step of a big for_each job mints its token from the job
// record alone.
type jobRecordOnly struct{ api.Orchestrator }

func (jobRecordOnly) Job(context.Context, string) (*engine.Job, []*engine.Step, error) {
	return nil, nil, errors.New("Job read every step of the job to mint a token")
}

func TestStepTokenMintReadsTheJobRecordOnly(t *testing.T) {
	f := newFixture(t)
	w := f.register("pod-worker")
	job := f.execute("pod")
	f.claimStep(w, job, "say")
	f.worker("POST", "/worker/jobs/"+job+"/steps/say/start", map[string]any{"worker_id": w}).expect(200)
	tok, _, err := api.NewStepTokens(0, nil).Mint(context.Background(), jobRecordOnly{f.eng}, w, job, "say")
	if err != nil || !strings.HasPrefix(tok, "apst_") {
		t.Fatalf("Mint = %q, %v", tok, err)
	}
}
