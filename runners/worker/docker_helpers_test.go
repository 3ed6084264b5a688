package worker

import (
	"fmt"
	"testing"
	"time"

	dockerclient "github.com/fsouza/go-dockerclient"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/docker"
	"github.com/appliance-sh/appliance/runners/docker/dockertest"
)

// testImage is the busybox image the docker tests run.
const testImage = dockertest.Image

// needDocker returns a docker runner on the local daemon with the test
// image built, and a client of the daemon, or skips the test with the
// reason (fails it under APPLIANCE_REQUIRE_DOCKER=1).
func needDocker(t *testing.T) (*docker.Runner, *dockerclient.Client) {
	t.Helper()
	client := dockertest.Require(t)
	d, err := docker.New(docker.Config{
		KillGrace: time.Second,
		Images:    map[string]string{"shell": testImage},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, client
}

// dockerStep is a step of a job no other test run uses; at the end of the
// test it checks that no container of the job is left.
func dockerStep(t *testing.T, client *dockerclient.Client, a *workflow.Action, input map[string]any, l *lines) *runners.Step {
	t.Helper()
	id := fmt.Sprintf("test-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if left := dockertest.Containers(t, client, runners.LabelJobID, id); len(left) > 0 {
			t.Errorf("%d container(s) of job %s left behind", len(left), id)
		}
	})
	return &runners.Step{JobID: id, Name: "step", Workspace: "ws", Dir: t.TempDir(), Action: a, Input: input, Log: l.log}
}
