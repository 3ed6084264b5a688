package workspace

import (
	"testing"
)

func TestExamplesWorkspaceLoads(t *testing.T) {
	ws, err := Load("examples", "../../examples", map[string]string{})
	if err != nil {
		t.Fatalf("load examples:\n%v", err)
	}
	if len(ws.Tasks) == 0 || len(ws.Actions) == 0 || len(ws.Triggers) == 0 {
		t.Fatalf("examples should define tasks, actions and triggers: %d, %d, %d", len(ws.Tasks), len(ws.Actions), len(ws.Triggers))
	}
}
