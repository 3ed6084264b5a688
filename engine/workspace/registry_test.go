package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

const registryTask = `tasks:
  hello:
    flow:
      greet:
        type: script
        script: echo %s
`

func writeWorkflow(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".workflows", "main.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRegistryHotReloadKeepsLastGoodRevision(t *testing.T) {
	dir := t.TempDir()
	writeWorkflow(t, dir, strings.ReplaceAll(registryTask, "%s", "one"))
	reg, err := NewRegistry(map[string]string{"ws": dir}, map[string]string{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, ok := reg.Current("ws")
	if !ok {
		t.Fatalf("workspace did not load: %+v", reg.List())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watching := make(chan error, 1)
	go func() { watching <- reg.Watch(ctx) }()

	// A good edit becomes the new current revision; the old one stays reachable.
	changed := reg.Changed()
	writeWorkflow(t, dir, strings.ReplaceAll(registryTask, "%s", "two"))
	waitFor(t, "the edit to load", func() bool {
		ws, _ := reg.Current("ws")
		return ws.Revision != first.Revision
	})
	select {
	case <-changed:
	default:
		t.Fatal("Changed() was not signalled by the reload")
	}
	second, _ := reg.Current("ws")
	if old, ok := reg.Revision("ws", first.Revision); !ok || old != first {
		t.Fatal("the previous revision is no longer loaded")
	}

	// A broken edit is reported while the last good revision stays active.
	writeWorkflow(t, dir, "tasks: [unclosed\n")
	waitFor(t, "the errors to be reported", func() bool { return len(reg.List()[0].Errors) > 0 })
	if ws, _ := reg.Current("ws"); ws != second {
		t.Fatal("a broken revision replaced the last good one")
	}
	if got := reg.List()[0].Errors[0].Error(); !strings.Contains(got, ".workflows/main.yaml:") {
		t.Fatalf("error does not name the file and line: %q", got)
	}

	// The fix loads, and files in new subdirectories are picked up too.
	writeWorkflow(t, dir, strings.ReplaceAll(registryTask, "%s", "three"))
	more := filepath.Join(dir, ".workflows", "more")
	if err := os.MkdirAll(more, 0o755); err != nil {
		t.Fatal(err)
	}
	extra := strings.ReplaceAll(strings.ReplaceAll(registryTask, "hello", "extra"), "%s", "four")
	if err := os.WriteFile(filepath.Join(more, "extra.yml"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fix and the new file to load", func() bool {
		ws, _ := reg.Current("ws")
		return ws.Tasks["extra"] != nil && len(reg.List()[0].Errors) == 0
	})
	cancel()
	if err := <-watching; err != nil {
		t.Fatal(err)
	}
}

func TestRegistryRejectsMissingDirectory(t *testing.T) {
	_, err := NewRegistry(map[string]string{"ws": filepath.Join(t.TempDir(), "nope")}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("want a clear error, got %v", err)
	}
}

func TestRegistryOnLoadSeesEveryRevisionBeforeItIsPublished(t *testing.T) {
	dir := t.TempDir()
	writeWorkflow(t, dir, strings.ReplaceAll(registryTask, "%s", "one"))
	r, err := NewRegistry(map[string]string{"main": dir}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	var publishedBefore []bool
	r.OnLoad(func(ws *workflow.Workspace) {
		seen = append(seen, ws.Revision)
		cur, ok := r.Current("main")
		publishedBefore = append(publishedBefore, ok && cur.Revision == ws.Revision)
	})
	first, _ := r.Current("main")
	writeWorkflow(t, dir, strings.ReplaceAll(registryTask, "%s", "two"))
	r.Reload("main")
	second, _ := r.Current("main")
	if len(seen) != 2 || seen[0] != first.Revision || seen[1] != second.Revision || first.Revision == second.Revision {
		t.Fatalf("OnLoad saw %v; want the current revision %s, then the new one %s", seen, first.Revision, second.Revision)
	}
	if publishedBefore[1] {
		t.Fatal("OnLoad ran after the new revision was published")
	}
	r.Reload("main") // nothing changed: no call
	if len(seen) != 2 {
		t.Fatalf("OnLoad called for an unchanged folder: %v", seen)
	}
}
