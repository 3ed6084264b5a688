// Package kubetest serves the small part of a Kubernetes API a worker's
// pod runner detection reads, on loopback, with a kubeconfig pointing at
// it: no cluster can run in tests, but the kubeconfig path, the client
// and the HTTP exchange are the real ones.
// A test helper: it must not import engine, store, app or the server's api
// packages.
package kubetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// API is a fake API server answering pod lists in one namespace.
type API struct {
	URL        string
	Kubeconfig string
	// Lists counts the pod lists it answered.
	Lists atomic.Int64
}

// Start serves the API until the test ends and writes a kubeconfig whose
// context names namespace.
func Start(t testing.TB, namespace string) *API {
	t.Helper()
	a := &API{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/"+namespace+"/pods" {
			a.Lists.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":%q}`,
			"kubetest serves no "+strings.ReplaceAll(r.URL.Path, `"`, ""))
	}))
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	a.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
contexts:
- name: test
  context:
    cluster: test
    user: test
    namespace: %s
current-context: test
users:
- name: test
  user:
    token: test-token
`, srv.URL, namespace)
	if err := os.WriteFile(a.Kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return a
}
