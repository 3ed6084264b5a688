package pod

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/worker"
)

// PodInit is what a step pod's init container prepares, read from its
// environment (buildPod sets it): the input file, the inline script, and
// for a script the workspace revision fetched with a step-bound token.
type PodInit struct {
	FilesDir   string // APPLIANCE_FILES_DIR
	InputJSON  string // APPLIANCE_INPUT_JSON
	ScriptFile string // APPLIANCE_SCRIPT_FILE (inline scripts)
	Script     string // APPLIANCE_SCRIPT
	ServerURL  string // APPLIANCE_SERVER_URL
	Token      string // APPLIANCE_WORKSPACE_TOKEN
	Workspace  string // APPLIANCE_WORKSPACE
	Revision   string // APPLIANCE_REVISION
	Dir        string // APPLIANCE_WORKSPACE_DIR ("" = no workspace)
}

// PodInitFromEnv reads a PodInit from the environment.
func PodInitFromEnv(getenv func(string) string) PodInit {
	return PodInit{
		FilesDir: getenv("APPLIANCE_FILES_DIR"), InputJSON: getenv("APPLIANCE_INPUT_JSON"),
		ScriptFile: getenv("APPLIANCE_SCRIPT_FILE"), Script: getenv("APPLIANCE_SCRIPT"),
		ServerURL: getenv("APPLIANCE_SERVER_URL"), Token: getenv("APPLIANCE_WORKSPACE_TOKEN"),
		Workspace: getenv("APPLIANCE_WORKSPACE"), Revision: getenv("APPLIANCE_REVISION"),
		Dir: getenv("APPLIANCE_WORKSPACE_DIR"),
	}
}

// Prepare writes the files and fetches the workspace.
func (p PodInit) Prepare(ctx context.Context, limits worker.WorkspaceLimits) error {
	if p.FilesDir == "" {
		return errors.New("APPLIANCE_FILES_DIR is not set: this command runs as a step pod's init container")
	}
	if err := os.MkdirAll(p.FilesDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.FilesDir, filepath.Base(runners.ContainerInput)), []byte(p.InputJSON), 0o644); err != nil {
		return fmt.Errorf("write input file: %w", err)
	}
	if p.ScriptFile != "" {
		if err := os.WriteFile(filepath.Join(p.FilesDir, filepath.Base(p.ScriptFile)), []byte(p.Script), 0o755); err != nil {
			return fmt.Errorf("write script: %w", err)
		}
	}
	if p.Dir == "" {
		return nil
	}
	if p.ServerURL == "" || p.Token == "" || p.Workspace == "" || p.Revision == "" {
		return errors.New("a script pod needs APPLIANCE_SERVER_URL, APPLIANCE_WORKSPACE_TOKEN, APPLIANCE_WORKSPACE and APPLIANCE_REVISION")
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	c := worker.NewClient(p.ServerURL, p.Token, &http.Client{})
	return c.FetchWorkspace(ctx, p.Workspace, p.Revision, p.Dir, limits)
}
