package runners

import (
	"encoding/json"
	"fmt"
)

// What the container runners (docker and pod) share: where a step's files
// sit inside its container, its labels, its environment and its images.

// Paths inside a step's container. The step's own files are copied into
// the container before it starts rather than bind-mounted, so they work
// whatever filesystem the daemon sees (a remote daemon, a worker that is
// itself in a container).
const (
	ContainerFilesDir = "/.appliance"
	ContainerInput    = ContainerFilesDir + "/input.json"
	ContainerScript   = ContainerFilesDir + "/script"
	ContainerWorkDir  = "/workspace"
)

// Labels set on every step container, so a leftover one can be found.
const (
	LabelJobID     = "appliance.job_id"
	LabelStep      = "appliance.step"
	LabelWorkspace = "appliance.workspace"
)

// ShellProbe runs a shell script with bash where the image has it, else sh,
// as the local runner prefers (the script is $0).
const ShellProbe = `if command -v bash >/dev/null 2>&1; then exec bash "$0" "$@"; fi; exec sh "$0" "$@"`

// ContainerEnv is what a step's container (docker or pod) is given: its
// input as JSON (the file $APPLIANCE_INPUT names, at ContainerInput) and
// its environment: INPUT_ variables, the action's env, then the
// APPLIANCE_ variables naming the step.
func ContainerEnv(step *Step) (inputJSON []byte, env []string, err error) {
	input := step.Input
	if input == nil {
		input = map[string]any{}
	}
	if inputJSON, err = json.Marshal(input); err != nil {
		return nil, nil, fmt.Errorf("encode input: %w", err)
	}
	if env, err = InputEnv(step.Input); err != nil {
		return nil, nil, err
	}
	env = append(env, MapEnv(step.Action.Env)...)
	env = append(env,
		"APPLIANCE_INPUT="+ContainerInput,
		"APPLIANCE_JOB_ID="+step.JobID,
		"APPLIANCE_STEP="+step.Name,
		"APPLIANCE_WORKSPACE="+step.Workspace,
	)
	return inputJSON, env, nil
}

// ContainerInterpreters is the interpreter a script of each language runs
// with inside its image (shell goes through ShellProbe).
var ContainerInterpreters = map[string]string{
	"python":     "python3",
	"javascript": "node",
	"typescript": "deno",
	"go":         "go",
}

// DefaultImages are the images script actions with runner docker (or pod)
// run in, per language, unless the worker config names others.
func DefaultImages() map[string]string {
	return map[string]string{
		"shell":      "debian:stable-slim",
		"python":     "python:3-slim",
		"javascript": "node:lts-slim",
		"typescript": "denoland/deno:latest",
		"go":         "golang:1",
	}
}

// LanguageImages is DefaultImages with the configured ones over it.
func LanguageImages(configured map[string]string) (map[string]string, error) {
	images := DefaultImages()
	for lang, image := range configured {
		norm, err := NormalLanguage(lang)
		if err != nil {
			return nil, fmt.Errorf("docker images: %w", err)
		}
		if image != "" {
			images[norm] = image
		}
	}
	return images, nil
}
