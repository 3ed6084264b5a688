package docker

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	docker "github.com/fsouza/go-dockerclient"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// containerSpec is everything needed to create and feed one step container.
type containerSpec struct {
	opts  docker.CreateContainerOptions
	files map[string][]byte // container path -> content, copied in before start
}

// specFor builds the container of a step: a docker action as it is
// written, or a script action run by its language's interpreter in the
// language's image with the workspace mounted read-only.
func (d *Runner) specFor(step *runners.Step) (*containerSpec, error) {
	a := step.Action
	if a == nil {
		return nil, fmt.Errorf("step %q has no action", step.Name)
	}
	inputJSON, env, err := runners.ContainerEnv(step)
	if err != nil {
		return nil, err
	}

	spec := &containerSpec{files: map[string][]byte{runners.ContainerInput: inputJSON}}
	cfg := &docker.Config{
		Env: env,
		Labels: map[string]string{
			runners.LabelJobID:     step.JobID,
			runners.LabelStep:      step.Name,
			runners.LabelWorkspace: step.Workspace,
		},
		AttachStdout: true,
		AttachStderr: true,
	}
	hc := &docker.HostConfig{}
	if err := applyResources(hc, a.Resources); err != nil {
		return nil, err
	}

	switch a.Type {
	case workflow.TypeDocker:
		if err := dockerAction(cfg, a); err != nil {
			return nil, err
		}
	case workflow.TypeScript, "":
		if err := d.scriptAction(cfg, hc, spec, step); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("docker runner cannot run %s actions", a.Type)
	}
	spec.opts = docker.CreateContainerOptions{Config: cfg, HostConfig: hc}
	return spec, nil
}

// dockerAction runs the action's image as written: `cmd` through the
// image's sh, else `entrypoint` and `command` over the image's own.
func dockerAction(cfg *docker.Config, a *workflow.Action) error {
	if a.Image == "" {
		return fmt.Errorf("docker action needs an image")
	}
	cfg.Image = a.Image
	switch {
	case a.Cmd != "":
		if len(a.Entrypoint) > 0 || len(a.Command) > 0 {
			return fmt.Errorf("docker action: cmd cannot be combined with entrypoint or command")
		}
		cfg.Entrypoint = []string{"sh", "-c", a.Cmd}
	default:
		if len(a.Entrypoint) > 0 {
			cfg.Entrypoint = a.Entrypoint
		}
		if len(a.Command) > 0 {
			cfg.Cmd = a.Command
		}
	}
	if a.Workdir != "" {
		// A relative workdir is taken from the container's root: an image
		// has no other directory the workflow could know it relative to.
		cfg.WorkingDir = path.Join("/", a.Workdir)
	}
	return nil
}

// scriptAction runs a script action's file with its language's
// interpreter, inside the language's image, in the workspace mounted
// read-only at /workspace.
func (d *Runner) scriptAction(cfg *docker.Config, hc *docker.HostConfig, spec *containerSpec, step *runners.Step) error {
	a := step.Action
	if (a.Script == "") == (a.Source == "") {
		return fmt.Errorf("script action needs exactly one of script and source")
	}
	if len(a.Dependencies) > 0 {
		return fmt.Errorf("dependencies are not supported with runner docker: install them in the image (worker config docker.images)")
	}
	lang, err := runners.NormalLanguage(a.Language)
	if err != nil {
		return err
	}
	image := d.cfg.Images[lang]
	if image == "" {
		return fmt.Errorf("runner docker: no image for language %s (set docker.images.%s in the worker config)", lang, lang)
	}
	if step.Dir == "" {
		return fmt.Errorf("runner docker: step has no workspace directory")
	}
	workspace, err := filepath.Abs(step.Dir)
	if err != nil {
		return fmt.Errorf("workspace directory: %w", err)
	}
	hostWorkdir, err := runners.InsideDir(workspace, a.Workdir, "workdir")
	if err != nil {
		return err
	}
	if fi, err := os.Stat(hostWorkdir); err != nil || !fi.IsDir() {
		return fmt.Errorf("workdir %q: no such directory in the workspace", a.Workdir)
	}
	rel, err := filepath.Rel(workspace, hostWorkdir)
	if err != nil {
		return fmt.Errorf("workdir %q: %w", a.Workdir, err)
	}

	file := runners.ContainerScript + runners.ScriptExt[lang]
	if a.Source != "" {
		host, err := runners.InsideDir(workspace, a.Source, "source")
		if err != nil {
			return err
		}
		if _, err := os.Stat(host); err != nil {
			return fmt.Errorf("source %q: not found in the workspace", a.Source)
		}
		file = path.Join(runners.ContainerWorkDir, filepath.ToSlash(filepath.Clean(a.Source)))
	} else {
		spec.files[file] = []byte(a.Script)
	}

	cfg.Image = image
	cfg.WorkingDir = path.Join(runners.ContainerWorkDir, filepath.ToSlash(rel))
	switch {
	case a.Interpreter != "":
		cfg.Entrypoint = runners.ScriptArgs(a.Interpreter, file)
	case lang == "shell":
		cfg.Entrypoint = []string{"sh", "-c", runners.ShellProbe, file}
	default:
		cfg.Entrypoint = runners.ScriptArgs(runners.ContainerInterpreters[lang], file)
	}
	hc.Binds = []string{workspace + ":" + runners.ContainerWorkDir + ":ro"}
	return nil
}
