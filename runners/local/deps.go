package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/runners"
)

// withDependencies installs a script's dependencies into a cache directory
// keyed by the workspace revision and a hash of the list (installing only on
// first use: once per revision, so a new revision picks up new releases of
// unpinned packages) and returns env pointing the interpreter at it. Before
// installing, it checks that the package index answers, and fails at once
// naming it when it does not, rather than after the installer's minutes of
// retries.
func (l *Runner) withDependencies(ctx context.Context, step *runners.Step, lang, interp string, deps []string, env []string, log func(stream, line string)) ([]string, error) {
	var install func(dir string) []string
	var pathVar, sub string
	switch lang {
	case "python":
		pathVar = "PYTHONPATH"
		install = func(dir string) []string { return l.pipInstall(interp, dir, deps) }
	case "javascript", "typescript":
		pathVar, sub = "NODE_PATH", "node_modules"
		install = func(dir string) []string { return l.nodeInstall(dir, deps) }
	case "shell":
		return nil, fmt.Errorf("dependencies need a non-shell language")
	default:
		return nil, fmt.Errorf("%s: dependencies are not supported (use a go.mod in the workspace)", lang)
	}

	h := sha256.Sum256([]byte(step.Workspace + "\x00" + step.Revision + "\x00" + lang + "\x00" + strings.Join(deps, "\x00")))
	key := lang + "-" + hex.EncodeToString(h[:8])
	dir := filepath.Join(l.cfg.DepsDir, key)

	lock := l.installLock(key)
	lock.Lock()
	defer lock.Unlock()
	if _, err := os.Stat(dir); err != nil {
		if args := install(dir); len(args) > 0 {
			if index := packageIndex(lang, args[0], deps, env); index != "" {
				if err := checkIndex(ctx, index, env, l.indexTimeout); err != nil {
					return nil, fmt.Errorf("%s: dependencies %s: %w; set the index in the worker's environment (e.g. PIP_INDEX_URL, npm_config_registry) or install them into the image", lang, strings.Join(deps, " "), err)
				}
			}
		}
		if err := l.installInto(ctx, dir, install, env, log, step.Flush); err != nil {
			return nil, fmt.Errorf("%s: install dependencies %s: %w", lang, strings.Join(deps, " "), err)
		}
	}
	return prependPath(env, pathVar, filepath.Join(dir, sub)), nil
}

func (l *Runner) installLock(key string) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.installs[key]
	if !ok {
		m = &sync.Mutex{}
		l.installs[key] = m
	}
	return m
}

// installInto runs the installer into a temporary directory and renames it
// into place, so a failed or interrupted install never looks cached.
func (l *Runner) installInto(ctx context.Context, dir string, install func(dir string) []string, env []string, log func(stream, line string), flush func()) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create dependency cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-")
	if err != nil {
		return fmt.Errorf("create dependency cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := install(tmp)
	if args == nil {
		return fmt.Errorf("no installer found")
	}
	log(runners.Stderr, "installing dependencies: "+strings.Join(args, " "))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = tmp
	cmd.Env = env
	code, err := runGroup(ctx, cmd, l.cfg.KillGrace, log, flush)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if code != 0 {
		return fmt.Errorf("installer exited with code %d", code)
	}
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		// Another worker process sharing the cache may have won the race.
		if _, statErr := os.Stat(dir); statErr == nil {
			return nil
		}
		return fmt.Errorf("store dependencies: %w", err)
	}
	_ = os.Chtimes(dir, time.Now(), time.Now())
	return nil
}

// pipInstall prefers uv, then pip of the interpreter the script runs with.
func (l *Runner) pipInstall(interp, dir string, deps []string) []string {
	if uv, err := l.cfg.LookPath("uv"); err == nil {
		return append([]string{uv, "pip", "install", "--target", dir}, deps...)
	}
	py := interp
	if filepath.Base(interp) == "uv" {
		return nil
	}
	return append([]string{py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--target", dir}, deps...)
}

// nodeInstall prefers bun, then npm.
func (l *Runner) nodeInstall(dir string, deps []string) []string {
	if bun, err := l.cfg.LookPath("bun"); err == nil {
		return append([]string{bun, "add", "--cwd", dir}, deps...)
	}
	if npm, err := l.cfg.LookPath("npm"); err == nil {
		return append([]string{npm, "install", "--no-audit", "--no-fund", "--prefix", dir}, deps...)
	}
	return nil
}
