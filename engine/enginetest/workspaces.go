package enginetest

import (
	"sync"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// Workspaces is an engine.Workspaces over a map; every added revision stays
// loaded.
type Workspaces struct {
	mu        sync.Mutex
	current   map[string]*workflow.Workspace
	revisions map[[2]string]*workflow.Workspace
}

// NewWorkspaces returns a registry holding wss as their current revisions.
func NewWorkspaces(wss ...*workflow.Workspace) *Workspaces {
	w := &Workspaces{current: map[string]*workflow.Workspace{}, revisions: map[[2]string]*workflow.Workspace{}}
	for _, ws := range wss {
		w.Add(ws)
	}
	return w
}

// Add makes ws the current revision of its workspace.
func (w *Workspaces) Add(ws *workflow.Workspace) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.current[ws.Name] = ws
	w.revisions[[2]string{ws.Name, ws.Revision}] = ws
}

// Current returns the current revision of a workspace.
func (w *Workspaces) Current(name string) (*workflow.Workspace, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws, ok := w.current[name]
	return ws, ok
}

// Revision returns a given revision of a workspace.
func (w *Workspaces) Revision(name, revision string) (*workflow.Workspace, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws, ok := w.revisions[[2]string{name, revision}]
	return ws, ok
}

// Remove unloads every revision of a workspace.
func (w *Workspaces) Remove(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.current, name)
	for k := range w.revisions {
		if k[0] == name {
			delete(w.revisions, k)
		}
	}
}
