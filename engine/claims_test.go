package engine_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

func TestClaimRoutesByRequiredTags(t *testing.T) {
	cases := []struct {
		name   string
		step   string
		runner string
		need   []string
	}{
		{"action tags", `{type: script, script: "true", tags: [gpu, linux]}`, "local", []string{"gpu", "linux"}},
		{"docker action needs docker", `{type: docker, image: alpine, cmd: "true"}`, "docker", []string{"docker"}},
		{"pod action needs kubernetes", `{type: pod, image: alpine, tags: [big]}`, "pod", []string{"big", "kubernetes"}},
		{"script in docker needs docker", `{type: script, script: "true", runner: docker}`, "docker", []string{"docker"}},
		{"plain script needs nothing", `{type: script, script: "true"}`, "local", []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML("s: "+tc.step)), enginetest.Options{NoWorker: true})
			job := f.Execute("t", nil)
			s := f.Step(job, "s")
			if !reflect.DeepEqual(s.RequiredTags, tc.need) && !(len(s.RequiredTags) == 0 && len(tc.need) == 0) {
				t.Errorf("required tags = %v, want %v", s.RequiredTags, tc.need)
			}
			if s.Runner != tc.runner {
				t.Errorf("runner = %s, want %s", s.Runner, tc.runner)
			}
			if len(tc.need) > 0 {
				short := f.Register("short", tc.need[:len(tc.need)-1], false)
				c, err := f.Engine.Claim(t.Context(), short, 0)
				if err != nil || c != nil {
					t.Fatalf("claim without %q = %+v, %v; want no work", tc.need[len(tc.need)-1], c, err)
				}
			}
			full := append([]string{"extra"}, tc.need...)
			w := f.Register("full", full, false)
			c, err := f.Engine.Claim(t.Context(), w, 0)
			if err != nil || c == nil || c.StepName != "s" {
				t.Fatalf("claim with every tag = %+v, %v; want step s", c, err)
			}
			if err := f.Engine.StartStep(t.Context(), w, job, "s"); err != nil {
				t.Fatal(err)
			}
			if s := f.Step(job, "s"); s.Status != engine.StepRunning || deref(s.WorkerID) != w {
				t.Errorf("claimed step = %s held by %s, want running held by %s", s.Status, deref(s.WorkerID), w)
			}
		})
	}
}

func TestReadyStepsAreClaimedOldestFirst(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok}`))
	jobs := []string{f.Execute("t", nil), f.Execute("t", nil), f.Execute("t", nil)}
	for i, want := range jobs {
		c, err := f.Engine.Claim(t.Context(), f.Worker, 0)
		if err != nil || c == nil || c.JobID != want {
			t.Fatalf("claim %d = %+v, %v; want job %s", i, c, err, want)
		}
	}
}

func TestLongPollClaimIsWokenByPromotionInTheSameCommit(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	f.ClaimStep("a")
	poller := f.Register("poller", nil, false)
	got := make(chan *engine.Claim, 1)
	go func() {
		c, err := f.Engine.Claim(t.Context(), poller, time.Hour)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	f.Eventually(func() bool { return f.Engine.ParkedClaims() == 1 }, func() string { return "claim never parked" })

	before := f.Store.Commits()
	if err := f.Engine.CompleteStep(t.Context(), f.Worker, job, "a", enginetest.Ok(nil)); err != nil {
		t.Fatal(err)
	}
	if n := f.Store.Commits() - before; n != 1 {
		t.Errorf("complete + promote + claim took %d commits, want 1", n)
	}
	c := <-got
	if c == nil || c.StepName != "b" {
		t.Fatalf("woken claim = %+v, want step b", c)
	}
	if s := f.Step(job, "b"); s.Status != engine.StepRunning || deref(s.WorkerID) != poller {
		t.Errorf("b = %s held by %s, want running held by the poller", s.Status, deref(s.WorkerID))
	}
}

func TestLongPollClaimWithoutWorkReturnsNothingWhenTheWaitEnds(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`a: {action: ok}`)), enginetest.Options{NoWorker: true})
	w := f.Register("w", nil, true)
	got := make(chan error, 1)
	go func() {
		c, err := f.Engine.Claim(t.Context(), w, 20*time.Second)
		if c != nil {
			err = errors.New("got a claim with no work around")
		}
		got <- err
	}()
	f.Eventually(func() bool { return f.Engine.ParkedClaims() == 1 && f.Clock.Pending() == 1 },
		func() string { return "claim never parked" })
	f.Clock.Advance(20 * time.Second)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := f.Engine.ParkedClaims(); n != 0 {
		t.Errorf("%d claims still parked after giving up", n)
	}
}

// holdCommits blocks the next commit until release is called, and reports
// when the loop has entered it.
func holdCommits(f *enginetest.Fixture) (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	armed := true
	f.Store.BeforeCommit(func(*engine.Batch) {
		if armed {
			armed = false
			close(in)
			<-out
		}
	})
	return in, func() { close(out) }
}

func TestClaimGivingUpAsItIsAssignedStillGetsTheStep(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	f.ClaimStep("a")
	poller := f.Register("poller", nil, false)
	got := make(chan *engine.Claim, 1)
	go func() {
		c, err := f.Engine.Claim(t.Context(), poller, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	f.Eventually(func() bool { return f.Engine.ParkedClaims() == 1 }, func() string { return "claim never parked" })
	f.WaitTimers(1)

	// The loop hands b to the poller (claims are answered before the
	// commit) and is held in the commit while the poller's wait runs out:
	// whether the poller sees the answer or its expiry first, and then
	// withdraws, it gets b.
	entered, release := holdCommits(f)
	completed := make(chan error, 1)
	go func() {
		completed <- f.Engine.CompleteStep(context.Background(), f.Worker, job, "a", enginetest.Ok(nil))
	}()
	<-entered
	f.Clock.Advance(10 * time.Second)
	release()
	if err := <-completed; err != nil {
		t.Fatal(err)
	}
	if c := <-got; c == nil || c.StepName != "b" {
		t.Fatalf("claim = %+v, want step b handed over as it gave up", c)
	}
	if s := f.Step(job, "b"); s.Status != engine.StepRunning || deref(s.WorkerID) != poller {
		t.Errorf("b = %s held by %s, want running held by the poller", s.Status, deref(s.WorkerID))
	}
}

func TestClaimAbandonedAsItIsAssignedReturnsTheStep(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	f.ClaimStep("a")
	poller := f.Register("poller", nil, false)
	ctx, cancel := context.WithCancel(t.Context())
	type answer struct {
		c   *engine.Claim
		err error
	}
	got := make(chan answer, 1)
	go func() {
		c, err := f.Engine.Claim(ctx, poller, time.Hour)
		got <- answer{c, err}
	}()
	f.Eventually(func() bool { return f.Engine.ParkedClaims() == 1 }, func() string { return "claim never parked" })

	// Hold the loop, so that the completion that promotes b and the
	// poller's withdraw queue up and are applied together: the loop hands
	// b to the poller, then hears it went away.
	release := f.Engine.HoldLoop()
	completed := make(chan error, 1)
	go func() {
		completed <- f.Engine.CompleteStep(context.Background(), f.Worker, job, "a", enginetest.Ok(nil))
	}()
	f.Eventually(func() bool { return f.Engine.QueuedCommands() == 1 }, func() string { return "completion never sent" })
	cancel() // the worker went away while the loop was handing it b
	f.Eventually(func() bool { return f.Engine.QueuedCommands() == 2 }, func() string { return "withdraw never sent" })
	release()
	if err := <-completed; err != nil {
		t.Fatal(err)
	}
	if a := <-got; a.c != nil || !errors.Is(a.err, context.Canceled) {
		t.Fatalf("abandoned claim = %+v, %v; want nothing and context.Canceled", a.c, a.err)
	}
	b := f.WaitStep(job, "b", engine.StepReady)
	if b.WorkerID != nil {
		t.Errorf("released b still held by %s", *b.WorkerID)
	}
	if c := f.ClaimStep("b"); c.StepName != "b" {
		t.Errorf("reclaim = %+v", c)
	}
}

func TestStepReportsAreCheckedAgainstTheHolder(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok}`))
	job := f.Execute("t", nil)
	f.ClaimStep("a")
	other := f.Register("other", nil, false)
	ctx := t.Context()
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"start by a non-holder", func() error { return f.Engine.StartStep(ctx, other, job, "a") }, engine.ErrConflict},
		{"start without a worker id", func() error { return f.Engine.StartStep(ctx, "", job, "a") }, engine.ErrInvalid},
		{"start by an unknown worker", func() error { return f.Engine.StartStep(ctx, "ghost", job, "a") }, engine.ErrNotFound},
		{"log push by a non-holder", func() error { return f.Engine.CheckHolder(ctx, other, job, "a") }, engine.ErrConflict},
		{"log push without a worker id", func() error { return f.Engine.CheckHolder(ctx, "", job, "a") }, engine.ErrInvalid},
		{"log push by an unknown worker", func() error { return f.Engine.CheckHolder(ctx, "ghost", job, "a") }, engine.ErrNotFound},
		{"log push for a step nobody claimed", func() error { return f.Engine.CheckHolder(ctx, f.Worker, job, "b") }, engine.ErrConflict},
		{"log push for an unknown step", func() error { return f.Engine.CheckHolder(ctx, f.Worker, job, "zz") }, engine.ErrNotFound},
		{"log push for an unknown job", func() error { return f.Engine.CheckHolder(ctx, f.Worker, "nope", "a") }, engine.ErrNotFound},
		{"complete by a non-holder", func() error { return f.Engine.CompleteStep(ctx, other, job, "a", enginetest.Ok(nil)) }, engine.ErrConflict},
		{"complete without a worker id", func() error { return f.Engine.CompleteStep(ctx, "", job, "a", enginetest.Ok(nil)) }, engine.ErrInvalid},
		{"complete by an unknown worker", func() error { return f.Engine.CompleteStep(ctx, "ghost", job, "a", enginetest.Ok(nil)) }, engine.ErrNotFound},
		{"complete a step nobody claimed", func() error { return f.Engine.CompleteStep(ctx, f.Worker, job, "b", enginetest.Ok(nil)) }, engine.ErrConflict},
		{"complete an unknown step", func() error { return f.Engine.CompleteStep(ctx, f.Worker, job, "zz", enginetest.Ok(nil)) }, engine.ErrNotFound},
		{"complete in an unknown job", func() error { return f.Engine.CompleteStep(ctx, f.Worker, "nope", "a", enginetest.Ok(nil)) }, engine.ErrNotFound},
		{"claim by an unknown worker", func() error { _, err := f.Engine.Claim(ctx, "ghost", 0); return err }, engine.ErrNotFound},
		{"heartbeat of an unknown worker", func() error { return f.Engine.Heartbeat(ctx, "ghost", nil) }, engine.ErrNotFound},
		{"register without a name", func() error { _, err := f.Engine.RegisterWorker(ctx, "", nil, false, ""); return err }, engine.ErrInvalid},
		{"start by the holder", func() error { return f.Engine.StartStep(ctx, f.Worker, job, "a") }, nil},
		{"log push by the holder", func() error { return f.Engine.CheckHolder(ctx, f.Worker, job, "a") }, nil},
		{"complete by the holder", func() error { return f.Engine.CompleteStep(ctx, f.Worker, job, "a", enginetest.Ok(nil)) }, nil},
		{"complete twice", func() error { return f.Engine.CompleteStep(ctx, f.Worker, job, "a", enginetest.Ok(nil)) }, engine.ErrConflict},
		{"log push after completion", func() error { return f.Engine.CheckHolder(ctx, f.Worker, job, "a") }, engine.ErrConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if s := f.Step(job, "a"); s.Status != engine.StepCompleted || s.StartedAt == nil {
		t.Errorf("a = %s started %v, want completed with started_at", s.Status, s.StartedAt)
	}
}

// TestWorkerCredentialsAndHoldersOutliveARestart: what a remote worker
// proves itself with is kept with its record, so after a restart the
// transport still checks its secret (and still knows an in-process worker
// for one), and the holder of a running step is still known.
func TestWorkerCredentialsAndHoldersOutliveARestart(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok}`))
	hash := strings.Repeat("c0", 32)
	remote, err := f.Engine.RegisterWorker(t.Context(), "remote", nil, false, hash)
	if err != nil {
		t.Fatal(err)
	}
	job := f.Execute("t", nil)
	if c, err := f.Engine.Claim(t.Context(), remote, time.Second); err != nil || c == nil || c.StepName != "a" {
		t.Fatalf("claim = %+v, %v", c, err)
	}
	if err := f.Engine.StartStep(t.Context(), remote, job, "a"); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if c, ok := f.Engine.WorkerCredential(remote); !ok || c.InProcess || c.SecretSHA256 != hash {
			t.Errorf("%s: remote credential = %+v, %v; want its secret's hash", when, c, ok)
		}
		if c, ok := f.Engine.WorkerCredential(f.Worker); !ok || !c.InProcess || c.SecretSHA256 != "" {
			t.Errorf("%s: in-process credential = %+v, %v", when, c, ok)
		}
		if _, ok := f.Engine.WorkerCredential("ghost"); ok {
			t.Errorf("%s: an unknown worker has a credential", when)
		}
		if h := f.Engine.StepHolder(job, "a"); h != remote {
			t.Errorf("%s: holder of a = %q, want %s", when, h, remote)
		}
		if h := f.Engine.StepHolder(job, "zz"); h != "" {
			t.Errorf("%s: holder of an unknown step = %q", when, h)
		}
	}
	check("before the restart")
	f.Restart()
	check("after the restart")
}

func TestReadyStepNoWorkerCanClaimIsLoggedOnce(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
gpu: {type: script, script: "true", tags: [gpu]}
cpu: {action: ok}`)), enginetest.Options{NoWorker: true})
	f.Register("plain", nil, false)
	job := f.Execute("t", nil)
	want := `step "gpu" needs worker tags [gpu]; no active worker has them`
	if lines := f.Logs.ServerLines(job); !reflect.DeepEqual(lines, []string{want}) {
		t.Errorf("server lines = %q, want just %q", lines, want)
	}
	if s := f.Step(job, "gpu"); s.Status != engine.StepReady {
		t.Errorf("gpu is %s, want it to stay ready", s.Status)
	}
	gpu := f.Register("gpu-box", []string{"gpu"}, false)
	c, err := f.Engine.Claim(t.Context(), gpu, 0)
	if err != nil || c == nil || c.StepName != "gpu" {
		t.Fatalf("claim by a gpu worker = %+v, %v", c, err)
	}
	if n := len(f.Logs.ServerLines(job)); n != 1 {
		t.Errorf("%d server lines, want 1", n)
	}
}

func TestStoppingTheEngineAnswersParkedClaimsWithNoWork(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok}`))
	type answer struct {
		c   *engine.Claim
		err error
	}
	got := make(chan answer, 1)
	go func() {
		c, err := f.Engine.Claim(t.Context(), f.Worker, time.Hour)
		got <- answer{c, err}
	}()
	f.Eventually(func() bool { return f.Engine.ParkedClaims() == 1 }, func() string { return "claim never parked" })
	f.Stop()
	if a := <-got; a.c != nil || a.err != nil {
		t.Errorf("parked claim at stop = %+v, %v; want nil, nil", a.c, a.err)
	}
	if _, err := f.Engine.CreateJob(t.Context(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"}); !errors.Is(err, engine.ErrStopped) {
		t.Errorf("create after stop: err = %v, want ErrStopped", err)
	}
}

func TestHolderOfACancelledStepMayStillPushItsLastLines(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}`))
	job := f.Execute("t", nil)
	f.ClaimStep("a")
	other := f.Register("other", nil, false)
	ctx := t.Context()
	if err := f.Engine.CancelJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	if s := f.Step(job, "a"); s.Status != engine.StepCancelled {
		t.Fatalf("a = %s, want cancelled", s.Status)
	}
	if err := f.Engine.CheckHolder(ctx, f.Worker, job, "a"); err != nil {
		t.Errorf("push of the cancelled step's holder: %v, want accepted", err)
	}
	if err := f.Engine.CheckHolder(ctx, other, job, "a"); !errors.Is(err, engine.ErrConflict) {
		t.Errorf("push of another worker: %v, want a conflict", err)
	}
	if err := f.Engine.CompleteStep(ctx, f.Worker, job, "a", enginetest.Ok(nil)); !errors.Is(err, engine.ErrConflict) {
		t.Errorf("complete of the cancelled step: %v, want a conflict", err)
	}
}
