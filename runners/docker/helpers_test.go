package docker

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/runners"

	docker "github.com/fsouza/go-dockerclient"

	"github.com/appliance-sh/appliance/runners/docker/dockertest"
)

// testImage is the busybox image the docker tests run.
const testImage = dockertest.Image

// needDocker returns a docker runner on the local daemon with the test
// image built (it is also the shell image), or skips the test with the
// reason (fails it under APPLIANCE_REQUIRE_DOCKER=1).
func needDocker(t *testing.T) *Runner {
	t.Helper()
	dockertest.Require(t)
	d, err := New(Config{
		KillGrace: time.Second,
		Images:    map[string]string{"shell": testImage},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// containersOf lists the containers, running or not, labelled with jobID.
func containersOf(t *testing.T, d *Runner, jobID string) []docker.APIContainers {
	t.Helper()
	return dockertest.Containers(t, d.client, runners.LabelJobID, jobID)
}

// uniqueJobID is a job id no other test run uses, and checks at the end
// of the test that no container of it is left.
func uniqueJobID(t *testing.T, d *Runner) string {
	t.Helper()
	id := fmt.Sprintf("test-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if left := containersOf(t, d, id); len(left) > 0 {
			t.Errorf("%d container(s) of job %s left behind", len(left), id)
		}
	})
	return id
}

// lines collects a step's output lines for assertions.
type lines struct {
	mu  sync.Mutex
	all []workerproto.LogLine
}

func (l *lines) log(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, workerproto.LogLine{Stream: stream, Line: line})
}

func (l *lines) stream(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, x := range l.all {
		if x.Stream == name {
			out = append(out, x.Line)
		}
	}
	return out
}

func (l *lines) has(stream, line string) bool {
	for _, x := range l.stream(stream) {
		if x == line {
			return true
		}
	}
	return false
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func errText(r runners.Result) string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
