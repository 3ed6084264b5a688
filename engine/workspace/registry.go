package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/fsnotify/fsnotify"
)

// keptRevisions bounds how many old revisions of a workspace stay loaded
// for the jobs still running on them.
const keptRevisions = 16

// reloadQuiet is how long a folder must be quiet after a change before it
// is reloaded, so an editor's burst of writes loads once.
const reloadQuiet = 150 * time.Millisecond

// Status is a workspace as the registry holds it: the revision in use (nil
// until one loads cleanly) and the problems of the newest revision on disk.
type Status struct {
	Name      string
	Workspace *workflow.Workspace // the last good revision; nil if none ever loaded
	Errors    workflow.Errors     // problems of the newest revision on disk; nil when it is the one in use
}

// entry is one workspace's state; entries are immutable once published.
type entry struct {
	status    Status
	revisions []*workflow.Workspace // newest last, at most keptRevisions
}

// Registry holds the loaded workspaces and the revisions still in use, and
// reloads a workspace when its folder changes. Reads are lock-free.
type Registry struct {
	dirs    map[string]string
	env     map[string]string
	opts    LoadOptions
	log     *slog.Logger
	mu      sync.Mutex                        // serialises reloads
	entries atomic.Pointer[map[string]*entry] // replaced, never mutated
	changed chan struct{}                     // closed and replaced on every change
	onLoad  func(*workflow.Workspace)         // under mu; see OnLoad
}

// NewRegistry loads every workspace (name -> directory), with the server's
// checks when opts is given. A workspace with errors is kept with its
// errors; NewRegistry fails only when a directory does not exist.
func NewRegistry(dirs map[string]string, env map[string]string, log *slog.Logger, opts ...LoadOptions) (*Registry, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Registry{dirs: map[string]string{}, env: env, log: log, changed: make(chan struct{})}
	if len(opts) > 0 {
		r.opts = opts[0]
	}
	empty := map[string]*entry{}
	r.entries.Store(&empty)
	for name, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("workspace %q: %w", name, err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("workspace %q: %s is not a directory", name, abs)
		}
		r.dirs[name] = abs
	}
	for name := range r.dirs {
		r.reload(name)
	}
	return r, nil
}

// List returns every workspace in name order.
func (r *Registry) List() []Status {
	entries := *r.entries.Load()
	out := make([]Status, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.status)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Current returns the active revision of a workspace.
func (r *Registry) Current(name string) (*workflow.Workspace, bool) {
	e, ok := (*r.entries.Load())[name]
	if !ok || e.status.Workspace == nil {
		return nil, false
	}
	return e.status.Workspace, true
}

// Revision returns a revision of a workspace if it is still loaded.
func (r *Registry) Revision(name, revision string) (*workflow.Workspace, bool) {
	e, ok := (*r.entries.Load())[name]
	if !ok {
		return nil, false
	}
	for _, ws := range e.revisions {
		if ws.Revision == revision {
			return ws, true
		}
	}
	return nil, false
}

// OnLoad calls fn with every revision in use now and, from then on, with
// each new revision before it is published: a job can be created on a
// revision only once fn has returned for it (the server snapshots the
// revision's files there).
func (r *Registry) OnLoad(fn func(*workflow.Workspace)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onLoad = fn
	for _, e := range *r.entries.Load() {
		if e.status.Workspace != nil {
			fn(e.status.Workspace)
		}
	}
}

// Changed returns a channel closed at the next change of any workspace
// (a new revision or new errors), for consumers such as the scheduler.
func (r *Registry) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Reload loads a workspace again from disk now.
func (r *Registry) Reload(name string) {
	if _, ok := r.dirs[name]; ok {
		r.reload(name)
	}
}

func (r *Registry) reload(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.entries.Load()
	prev := old[name]
	next := &entry{status: Status{Name: name}}
	if prev != nil {
		next.status.Workspace = prev.status.Workspace
		next.revisions = prev.revisions
	}

	ws, err := LoadWith(name, r.dirs[name], r.env, r.opts)
	switch {
	case err != nil:
		next.status.Errors = problems(err)
		r.log.Error("workspace has errors; keeping its last good revision",
			"workspace", name, "errors", len(next.status.Errors), "first", next.status.Errors[0].Error())
	case prev != nil && prev.status.Workspace != nil && prev.status.Workspace.Revision == ws.Revision:
		if prev.status.Errors == nil {
			return // nothing changed
		}
	default:
		if r.onLoad != nil {
			r.onLoad(ws)
		}
		next.status.Workspace = ws
		next.revisions = append(append([]*workflow.Workspace(nil), next.revisions...), ws)
		if len(next.revisions) > keptRevisions {
			next.revisions = next.revisions[len(next.revisions)-keptRevisions:]
		}
		r.log.Info("workspace loaded", "workspace", name, "revision", ws.Revision,
			"tasks", len(ws.Tasks), "actions", len(ws.Actions), "triggers", len(ws.Triggers))
	}

	entries := make(map[string]*entry, len(old)+1)
	for k, v := range old {
		entries[k] = v
	}
	entries[name] = next
	r.entries.Store(&entries)
	close(r.changed)
	r.changed = make(chan struct{})
}

// problems is a failed load's Errors; an error of another kind (the
// folder cannot be read) is one problem per line, of no file.
func problems(err error) workflow.Errors {
	if es, ok := err.(workflow.Errors); ok {
		return es
	}
	var es workflow.Errors
	for _, line := range strings.Split(err.Error(), "\n") {
		es = append(es, &workflow.Error{Msg: line})
	}
	return es
}

// Watch reloads a workspace shortly after its folder changes, until ctx
// ends. It uses the operating system's file notifications (no polling).
func (r *Registry) Watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch workspaces: %w", err)
	}
	defer w.Close()
	for _, dir := range r.dirs {
		if err := watchTree(w, dir); err != nil {
			return err
		}
	}
	// Anything edited between the first load and the watches being in
	// place raised no event: look once more now that they are.
	for name := range r.dirs {
		r.reload(name)
	}

	pending := map[string]bool{}
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-w.Errors:
			r.log.Warn("workspace watcher", "err", err)
		case ev := <-w.Events:
			name := r.owner(ev.Name)
			if name == "" {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
					_ = watchTree(w, ev.Name)
				}
			}
			pending[name] = true
			quiet.Reset(reloadQuiet)
		case <-quiet.C:
			for name := range pending {
				r.reload(name)
			}
			clear(pending)
		}
	}
}

// owner returns the workspace a changed path belongs to.
func (r *Registry) owner(path string) string {
	for name, dir := range r.dirs {
		if path == dir || strings.HasPrefix(path, dir+string(filepath.Separator)) {
			rel, _ := filepath.Rel(dir, path)
			if strings.HasPrefix(rel, ".git") {
				return ""
			}
			return name
		}
	}
	return ""
}

func watchTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a directory that vanished meanwhile
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if err := w.Add(path); err != nil {
			return fmt.Errorf("watch %s: %w", path, err)
		}
		return nil
	})
}
