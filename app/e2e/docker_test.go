package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/docker/dockertest"
)

func TestDockerStepRunsOnTheInProcessWorkerWithTheDockerTag(t *testing.T) {
	client := dockertest.Require(t)
	ws := t.TempDir()
	writeWorkspace(t, ws, `
actions:
  greet:
    type: docker
    image: `+dockertest.Image+`
    input:
      name: {type: string}
    cmd: |
      echo "hello $INPUT_NAME from $(cat /etc/hostname | cut -c1-3)..."
      echo 'OUTPUT: {"greeted": "{{ input.name }}"}'
tasks:
  hello:
    input:
      who: {type: string, default: docker}
    flow:
      greet:
        action: greet
        input:
          name: "{{ input.who }}"
`)
	f := startFixture(t, map[string]string{"main": ws}, 2)

	id := f.execute("main", "hello", nil)
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.step("greet"))
	}
	if out, _ := j.step("greet").Output.(map[string]any); out["greeted"] != "docker" {
		t.Errorf("step output = %v, want greeted: docker", j.step("greet").Output)
	}
	if logs := f.logs(id, "greet"); !strings.Contains(logs, "hello docker from ") {
		t.Errorf("step logs lack the container's line:\n%s", logs)
	}
	if left := dockertest.Containers(t, client, runners.LabelJobID, id); len(left) != 0 {
		t.Errorf("%d container(s) of the job left behind", len(left))
	}

	var page struct {
		Items []struct {
			Tags []string `json:"tags"`
		} `json:"items"`
	}
	if code := do(t, "GET", f.url+"/api/workers", nil, &page); code != 200 || len(page.Items) != 1 {
		t.Fatalf("workers: %d %+v", code, page)
	}
	if tags := page.Items[0].Tags; !slices.Contains(tags, "docker") {
		t.Errorf("in-process worker tags = %v, want docker among them", tags)
	}
}
