package workflow

import (
	"context"
	"log/slog"
)

// Status is a workspace as the registry holds it: the revision in use (nil
// until one loads cleanly) and the problems of the newest revision on disk.
type Status struct {
	Name      string
	Workspace *Workspace // the last good revision; nil if none ever loaded
	Errors    []string   // problems of the newest revision on disk; nil when it is the one in use
}

// Registry holds the loaded workspaces and every revision still in use, and
// reloads a workspace when its folder changes.
type Registry struct {
	dirs map[string]string
	env  map[string]string
	log  *slog.Logger
}

// NewRegistry loads every workspace (name -> directory). Workspaces with
// errors are kept with their errors; it fails only for unreadable config.
func NewRegistry(dirs map[string]string, env map[string]string, log *slog.Logger) (*Registry, error) {
	return &Registry{dirs: dirs, env: env, log: log}, errUnimplemented
}

// List returns every workspace by name order.
func (r *Registry) List() []Status { return nil }

// Current returns the active revision of a workspace.
func (r *Registry) Current(name string) (*Workspace, bool) { return nil, false }

// Revision returns a revision of a workspace if it is still loaded.
func (r *Registry) Revision(name, revision string) (*Workspace, bool) { return nil, false }

// Watch reloads workspaces when their folders change, until ctx ends.
func (r *Registry) Watch(ctx context.Context) error { return errUnimplemented }
