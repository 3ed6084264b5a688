package api_test

import (
	"path/filepath"
	"testing"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/engine"
)

const eventSourceWorkflow = `
tasks:
  produce:
    flow:
      emit: {type: script, script: "true"}
  handle:
    flow:
      ok: {type: script, script: "true"}
triggers:
  known:
    type: event_source
    task: produce
    target_task: handle
  fresh:
    type: event_source
    task: produce
    target_task: handle
  off:
    type: event_source
    task: produce
    target_task: handle
    enabled: false
`

// supervisorState is an event-source supervisor that knows "known" only.
type supervisorState struct{ running bool }

func (s supervisorState) Status(_, trigger string) (engine.ConsumerStatus, bool) {
	if trigger == "known" {
		return engine.ConsumerStatus{State: engine.ConsumerRunning, ConsumerJobID: "0190d7a4-0000-7000-8000-000000000001"}, true
	}
	return engine.ConsumerStatus{}, false
}

func (s supervisorState) Running() bool { return s.running }

// An enabled event source the running supervisor has not taken up yet
// (the server is starting, or a reload just added it) is starting; a
// disabled one, or any without a running supervisor, is stopped.
func TestTriggersListShowsAnEventSourceNotTakenUpYetAsStarting(t *testing.T) {
	for _, tc := range []struct {
		running bool
		want    map[string]string
	}{
		{true, map[string]string{"known": "running", "fresh": "starting", "off": "stopped"}},
		{false, map[string]string{"known": "running", "fresh": "stopped", "off": "stopped"}},
	} {
		tmp := t.TempDir()
		dir := filepath.Join(tmp, "ws")
		writeFile(t, filepath.Join(dir, ".workflows", "main.yaml"), eventSourceWorkflow, 0o644)
		sup := supervisorState{running: tc.running}
		f := startAPI(t, tmp, map[string]string{"ws": dir}, func(c *fixtureConfig) { c.EventSources = sup })
		var _ api.EventSources = sup
		got := map[string]string{}
		for _, tr := range f.do("GET", "/api/workspaces/ws/triggers", nil, nil).expect(200).array() {
			got[tr["name"].(string)] = tr["state"].(string)
		}
		for name, want := range tc.want {
			if got[name] != want {
				t.Errorf("supervisor running %v: %s is %q, want %q", tc.running, name, got[name], want)
			}
		}
	}
}
