package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// Config configures the local process runner. Zero values are defaults.
type Config struct {
	// KillGrace is how long a step has to exit after SIGTERM before its
	// process group is killed (default 5s).
	KillGrace time.Duration
	// DepsDir caches installed script dependencies (default
	// <user cache dir>/appliance/deps).
	DepsDir string
	// TempDir holds inline scripts and input files while steps run (default
	// /dev/shm where there is one, else the system temporary directory);
	// never inside the workspace.
	TempDir string
	// Env is the environment steps start from (default os.Environ()).
	Env []string
	// LookPath finds interpreters (default exec.LookPath).
	LookPath func(file string) (string, error)
}

// Runner runs script actions as local processes.
type Runner struct {
	cfg   Config
	paths *pathCache // behind cfg.LookPath

	mu       sync.Mutex
	installs map[string]*sync.Mutex // dependency cache key -> its install lock

	indexTimeout time.Duration // how long a package index has to answer
}

// New returns the local process runner.
func New(cfg Config) *Runner {
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 5 * time.Second
	}
	if cfg.DepsDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cfg.DepsDir = filepath.Join(base, "appliance", "deps")
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.TempDir == "" {
		cfg.TempDir = defaultTempDir()
	}
	if cfg.LookPath == nil {
		cfg.LookPath = exec.LookPath
	}
	paths := newPathCache(cfg.LookPath)
	cfg.LookPath = paths.LookPath
	return &Runner{cfg: cfg, paths: paths, installs: map[string]*sync.Mutex{}, indexTimeout: indexTimeout}
}

// Run executes the step's script or source file with its language's
// interpreter, in the workspace directory (or its workdir).
func (l *Runner) Run(ctx context.Context, step *runners.Step) (int, error) {
	a := step.Action
	if a == nil {
		return 0, fmt.Errorf("step %q has no action", step.Name)
	}
	if a.Type != "" && a.Type != workflow.TypeScript {
		return 0, fmt.Errorf("local runner cannot run %s actions", a.Type)
	}
	if (a.Script == "") == (a.Source == "") {
		return 0, fmt.Errorf("script action needs exactly one of script and source")
	}
	lang, err := runners.NormalLanguage(a.Language)
	if err != nil {
		return 0, err
	}
	cwd, err := runners.InsideDir(step.Dir, a.Workdir, "workdir")
	if err != nil {
		return 0, err
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return 0, fmt.Errorf("workdir %q: no such directory in the workspace", a.Workdir)
	}
	interp, err := findInterpreter(lang, a.Interpreter, l.cfg.LookPath)
	if err != nil {
		return 0, err
	}

	input := step.Input
	if input == nil {
		input = map[string]any{}
	}
	inputJSON, err := json.Marshal(input)
	if err != nil {
		return 0, fmt.Errorf("encode input: %w", err)
	}
	var script []byte
	if a.Source == "" {
		script = []byte(a.Script)
	}
	files, err := newStepFiles(l.cfg.TempDir, runners.ScriptExt[lang], script, inputJSON)
	if err != nil {
		return 0, err
	}
	defer files.close()

	file := files.script
	if a.Source != "" {
		if file, err = runners.InsideDir(step.Dir, a.Source, "source"); err != nil {
			return 0, err
		}
		if _, err := os.Stat(file); err != nil {
			return 0, fmt.Errorf("source %q: not found in the workspace", a.Source)
		}
	}

	env, err := l.environment(step, files.input)
	if err != nil {
		return 0, err
	}
	if len(a.Dependencies) > 0 {
		if env, err = l.withDependencies(ctx, step, lang, interp, a.Dependencies, env, step.Log); err != nil {
			return 0, err
		}
	}

	args := runners.ScriptArgs(interp, file)
	if isTsc(interp) {
		shown := a.Source
		if shown == "" {
			shown = "script.ts"
		}
		if args, err = l.tscArgs(interp, file, shown); err != nil {
			return 0, err
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = cwd
	cmd.Env = env
	code, err := runGroup(ctx, cmd, l.cfg.KillGrace, step.Log, step.Flush)
	if errors.Is(err, fs.ErrNotExist) {
		l.paths.forget(args[0]) // the interpreter moved since it was found
	}
	if errors.Is(err, syscall.E2BIG) {
		err = tooBig(step.Input, env, err)
	}
	return code, err
}

// environment is the step's environment: the worker's own, then the input
// as INPUT_ variables, the action's env, and the APPLIANCE_ variables (last,
// so they cannot be overridden by accident).
func (l *Runner) environment(step *runners.Step, inputFile string) ([]string, error) {
	inputs, err := runners.InputEnv(step.Input)
	if err != nil {
		return nil, err
	}
	env := append([]string{}, l.cfg.Env...)
	env = append(env, inputs...)
	env = append(env, runners.MapEnv(step.Action.Env)...)
	env = append(env,
		"APPLIANCE_INPUT="+inputFile,
		"APPLIANCE_JOB_ID="+step.JobID,
		"APPLIANCE_STEP="+step.Name,
		"APPLIANCE_WORKSPACE="+step.Workspace,
	)
	return env, nil
}

// Kind declares the local runner: every worker has it.
func Kind() runners.Kind {
	return runners.Kind{Name: "local", Detect: func(context.Context, runners.DetectEnv) (runners.Runner, error) {
		return New(Config{}), nil
	}}
}
