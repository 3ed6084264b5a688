package local

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// indexTimeout bounds the check that a package index answers before an
// install: without one, pip and npm retry for minutes before failing.
const indexTimeout = 3 * time.Second

// Default package indexes, used when the environment names none.
const (
	defaultPyPI = "https://pypi.org/simple/"
	defaultNPM  = "https://registry.npmjs.org/"
)

// packageIndex returns the index an install of deps would use, as the
// installer reads it from env, or "" when it needs none: pip told not to
// use one (PIP_NO_INDEX), or every dependency a local path or file URL.
func packageIndex(lang, installer string, deps, env []string) string {
	if allLocal(deps) {
		return ""
	}
	switch lang {
	case "python":
		if truthy(envValue(env, "PIP_NO_INDEX")) {
			return ""
		}
		names := []string{"PIP_INDEX_URL"}
		if filepath.Base(installer) == "uv" {
			names = []string{"UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"}
			if truthy(envValue(env, "UV_OFFLINE")) {
				return ""
			}
		}
		return firstEnv(env, defaultPyPI, names...)
	default: // javascript, typescript
		names := []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"}
		if filepath.Base(installer) == "bun" {
			names = append([]string{"BUN_CONFIG_REGISTRY"}, names...)
		}
		return firstEnv(env, defaultNPM, names...)
	}
}

// checkIndex fails fast, naming the index, when it does not answer within
// timeout. Any HTTP answer counts (a 404 is still an index that answers);
// a file: index must exist.
func checkIndex(ctx context.Context, index string, env []string, timeout time.Duration) error {
	u, err := url.Parse(index)
	if err != nil {
		return fmt.Errorf("package index %q is not a URL: %w", index, err)
	}
	switch u.Scheme {
	case "file":
		if _, err := os.Stat(u.Path); err != nil {
			return fmt.Errorf("no package index at %s: %w", index, err)
		}
		return nil
	case "http", "https":
	default:
		return nil // the installer's own business
	}
	proxy := (&httpproxy.Config{
		HTTPProxy:  firstEnv(env, "", "HTTP_PROXY", "http_proxy"),
		HTTPSProxy: firstEnv(env, "", "HTTPS_PROXY", "https_proxy"),
		NoProxy:    firstEnv(env, "", "NO_PROXY", "no_proxy"),
	}).ProxyFunc()
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:             func(r *http.Request) (*url.URL, error) { return proxy(r.URL) },
			DisableKeepAlives: true,
		},
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, index, nil)
	if err != nil {
		return fmt.Errorf("package index %q: %w", index, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("no package index reachable at %s within %s (%v)", redact(u), timeout, unwrapURLError(err))
	}
	resp.Body.Close()
	return nil
}

// redact drops a password from an index URL before it reaches a log.
func redact(u *url.URL) string {
	if u.User == nil {
		return u.String()
	}
	c := *u
	c.User = url.User(u.User.Username())
	return c.String()
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func allLocal(deps []string) bool {
	for _, d := range deps {
		if !(strings.HasPrefix(d, "/") || strings.HasPrefix(d, "./") || strings.HasPrefix(d, "../") || strings.HasPrefix(d, "file:")) {
			return false
		}
	}
	return true
}

func truthy(v string) bool {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// envValue is the last value of name in env, as a process would see it.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

func firstEnv(env []string, def string, names ...string) string {
	for _, n := range names {
		if v := envValue(env, n); v != "" {
			return v
		}
	}
	return def
}
