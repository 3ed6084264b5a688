package local

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// interpreters lists, per language, the binaries tried in order when the
// action names none. A shell script's {{ }} values are quoted for any
// POSIX shell: bash, else sh, else busybox's sh (a minimal image).
var interpreters = map[string][]string{
	"shell":      {"bash", "sh", "busybox"},
	"python":     {"uv", "python3", "python"},
	"javascript": {"bun", "node"},
	"typescript": {"bun", "deno", "tsc"},
	"go":         {"go"},
}

// companions are programs an interpreter cannot run a script without: tsc
// only transpiles TypeScript, node runs the result (see tsnode.go).
var companions = map[string]string{"tsc": "node"}

// findInterpreter resolves the binary to run a script of lang with.
func findInterpreter(lang, override string, lookPath func(string) (string, error)) (string, error) {
	if override != "" {
		path, err := lookPath(override)
		if err != nil {
			return "", fmt.Errorf("%s: interpreter %q not found", lang, override)
		}
		return path, nil
	}
	for _, name := range interpreters[lang] {
		path, err := lookPath(name)
		if err != nil {
			continue
		}
		if companion := companions[name]; companion != "" {
			if _, err := lookPath(companion); err != nil {
				continue
			}
		}
		return path, nil
	}
	var tried []string
	for _, name := range interpreters[lang] {
		if companion := companions[name]; companion != "" {
			name += " with " + companion
		}
		tried = append(tried, name)
	}
	return "", fmt.Errorf("%s: no interpreter found (tried %s)", lang, strings.Join(tried, ", "))
}

// pathCache remembers where programs were found on PATH, so a step does
// not stat every PATH entry for its interpreter. A path that fails to start
// is forgotten (the program moved), and so is everything after a minute, so
// an interpreter installed later is found.
type pathCache struct {
	lookPath func(string) (string, error)
	mu       sync.Mutex
	found    map[string]cachedPath
	now      func() time.Time
}

type cachedPath struct {
	path string
	at   time.Time
}

const pathCacheTTL = time.Minute

func newPathCache(lookPath func(string) (string, error)) *pathCache {
	return &pathCache{lookPath: lookPath, found: map[string]cachedPath{}, now: time.Now}
}

func (c *pathCache) LookPath(name string) (string, error) {
	c.mu.Lock()
	hit, ok := c.found[name]
	c.mu.Unlock()
	if ok && c.now().Sub(hit.at) < pathCacheTTL {
		return hit.path, nil
	}
	path, err := c.lookPath(name)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.found[name] = cachedPath{path: path, at: c.now()}
	c.mu.Unlock()
	return path, nil
}

// forget drops every name that resolved to path.
func (c *pathCache) forget(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, hit := range c.found {
		if hit.path == path {
			delete(c.found, name)
		}
	}
}
