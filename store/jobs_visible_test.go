package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

// The visibility filter against a plain reading of every job: for every
// scope and page, the page is the visible jobs newest first, full, and
// the total counts the visible ones only. Visibility goes by the access
// path stored on each job, not its task name: a task's jobs from before
// it moved into a hidden folder, and a hook job named like a visible task
// but fired by a hidden one, are told apart.
func TestVisibleJobsPagesAreFullAndTotalsCountOnlyVisibleJobs(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	type task struct{ ws, name, path string }
	tasks := []task{
		{"prod", "deploy", "deploy"}, {"prod", "build", "build"}, {"prod", "secret", "secret"},
		{"dev", "deploy", "deploy"}, {"dev", "secret", "secret"}, {"ops", "backup", "backup"},
		{"prod", "deploy", "secret/deploy"}, // a hook job of a hidden task, or deploy after a move
		{"prod", "secret", "open/secret"},   // a job of a task named like a hidden one
	}
	var all []*engine.Job
	for i := range 120 {
		tk := tasks[(i*7)%len(tasks)]
		// Some jobs share a creation second: order then falls to the id.
		j := newJob(fmt.Sprintf("j%03d", i), tk.ws, tk.name, i/3)
		j.AccessPath = tk.path
		all = append(all, j)
	}
	commit(t, db, &engine.Batch{Jobs: all})
	visible := func(ws, path string) bool { return !strings.HasPrefix(path, "secret") && ws != "ops" }

	// want: the reference answer from every job, newest first.
	newestFirst := slices.Clone(all)
	slices.SortFunc(newestFirst, func(a, b *engine.Job) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return compareStrings(b.ID, a.ID)
	})
	for _, scope := range []engine.JobFilter{{}, {Workspace: "prod"}, {Workspace: "prod", TaskName: "deploy"}, {Workspace: "prod", TaskName: "secret"}, {Workspace: "ops"},
		{Statuses: []string{engine.JobPending}}, {Workspace: "prod", SourceType: engine.SourceAPI}} {
		var want []string
		for _, j := range newestFirst {
			if visible(j.Workspace, j.AccessPath) && (scope.Workspace == "" || scope.Workspace == j.Workspace) && (scope.TaskName == "" || scope.TaskName == j.TaskName) {
				want = append(want, j.ID)
			}
		}
		for _, pg := range []struct{ limit, offset int }{{10, 0}, {10, 10}, {25, 30}, {500, 0}, {10, 1000}} {
			f := scope
			f.Limit, f.Offset, f.Visible = pg.limit, pg.offset, visible
			jobs, total, err := db.Jobs(ctx, f)
			if err != nil {
				t.Fatalf("Jobs(%+v): %v", f, err)
			}
			lo, hi := min(pg.offset, len(want)), min(pg.offset+pg.limit, len(want))
			if got := jobIDs(jobs); !slices.Equal(got, want[lo:hi]) || total != len(want) {
				t.Errorf("scope %s/%s page %+v: got %v total %d, want %v total %d", scope.Workspace, scope.TaskName, pg, got, total, want[lo:hi], len(want))
			}
		}
	}
	// A filter that hides nothing answers exactly as no filter.
	plain, ptotal, _ := db.Jobs(ctx, engine.JobFilter{Limit: 30, Offset: 5})
	open, ototal, _ := db.Jobs(ctx, engine.JobFilter{Limit: 30, Offset: 5, Visible: func(string, string) bool { return true }})
	if !slices.Equal(jobIDs(plain), jobIDs(open)) || ptotal != ototal || ptotal != 120 {
		t.Fatalf("all-visible filter differs from none: %d vs %d", ototal, ptotal)
	}
	// Nothing visible: an empty page and a zero total.
	none, ntotal, _ := db.Jobs(ctx, engine.JobFilter{Limit: 30, Visible: func(string, string) bool { return false }})
	if len(none) != 0 || ntotal != 0 {
		t.Fatalf("nothing visible: %d jobs, total %d", len(none), ntotal)
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
