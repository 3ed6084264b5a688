package docker

import (
	"fmt"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/runners"

	docker "github.com/fsouza/go-dockerclient"

	"github.com/appliance-sh/appliance/runners/docker/dockertest"
	"github.com/appliance-sh/appliance/runners/runnertest"
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

// lines collects a step's output lines for assertions (runnertest.Lines
// under the names these tests use).
type lines struct{ runnertest.Lines }

func (l *lines) log(stream, line string)      { l.Log(stream, line) }
func (l *lines) stream(name string) []string  { return l.Stream(name) }
func (l *lines) has(stream, line string) bool { return l.Has(stream, line) }

var (
	eventually  = runnertest.Eventually
	testContext = runnertest.Context
	errText     = runnertest.ErrText
	writeFile   = runnertest.WriteFile
)
