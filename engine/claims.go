package engine

import (
	"container/list"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/template/quote"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// waiter is a parked long-poll claim.
type waiter struct {
	workerID string
	tags     map[string]bool
	kind     StepKind
	got      chan claimResult // buffered: the loop never blocks on it
	elem     *list.Element    // set while parked
	assigned bool
	answered bool // the loop has given it its result (see batch.answer)
	// many: a claim of up to max steps at once, answered once the claims
	// are durable (see ClaimSteps); took gathers them.
	many bool
	max  int
	took []claimResult
}

// newWaiter returns a claim's waiter: its channel holds the parked notice
// (see claimResult.parked) and the result.
func newWaiter(workerID string) *waiter {
	return &waiter{workerID: workerID, got: make(chan claimResult, 2)}
}

type claimResult struct {
	claim *Claim
	err   error
	// render, when set, renders the claim's action spec: the claiming
	// caller runs it, never the loop.
	render func(ctx context.Context, c *Claim) error
	// parked tells the claimer that the loop found nothing and parked its
	// claim: only then does it arm a timer for its wait, so a claim
	// answered at once (the common case under load) costs none.
	parked bool
	// many holds the steps of a claim of several (see ClaimSteps).
	many []claimResult
}

// waiterQueue keeps parked claims in arrival order.
type waiterQueue struct{ l *list.List }

func newWaiterQueue() *waiterQueue { return &waiterQueue{l: list.New()} }

func (q *waiterQueue) park(w *waiter) { w.elem = q.l.PushBack(w) }

func (q *waiterQueue) len() int { return q.l.Len() }

func (q *waiterQueue) remove(w *waiter) {
	if w.elem != nil {
		q.l.Remove(w.elem)
		w.elem = nil
	}
}

// firstMatch returns the longest-waiting claim that may run a step needing
// tags (of a consumer job, or not).
func (q *waiterQueue) firstMatch(need []string, consumer bool, except string) *waiter {
	for el := q.l.Front(); el != nil; el = el.Next() {
		if w := el.Value.(*waiter); covers(w.tags, need) && w.kind.admits(consumer) && w.workerID != except {
			return w
		}
	}
	return nil
}

func (q *waiterQueue) drain() []*waiter {
	var ws []*waiter
	for el := q.l.Front(); el != nil; el = el.Next() {
		w := el.Value.(*waiter)
		w.elem = nil
		ws = append(ws, w)
	}
	q.l.Init()
	return ws
}

// Claim hands the worker the oldest ready step whose required tags it has,
// waiting up to wait for one; nil without error means no work. The tags
// are those the worker registered with: a claim cannot widen them.
//
// The loop hands over the step with a snapshot of its scope, and the
// action spec renders here, in the caller's goroutine, under the render
// limits. A step whose spec fails to render fails (through the loop), and
// the claim looks once more, without waiting.
func (e *Engine) Claim(ctx context.Context, workerID string, wait time.Duration) (*Claim, error) {
	return e.ClaimKind(ctx, workerID, wait, AllSteps)
}

// StepKind selects which ready steps a claim takes: an event source's
// consumer step runs as long as its source does, so a pool can keep
// slots for consumers apart from those for jobs.
type StepKind int

const (
	AllSteps          StepKind = iota // any step
	JobSteps                          // any step but a consumer job's
	ConsumerStepsOnly                 // only steps of event sources' consumer jobs
)

func (k StepKind) admits(consumer bool) bool {
	switch k {
	case JobSteps:
		return !consumer
	case ConsumerStepsOnly:
		return consumer
	}
	return true
}

// ClaimKind is Claim taking only steps of kind.
func (e *Engine) ClaimKind(ctx context.Context, workerID string, wait time.Duration, kind StepKind) (*Claim, error) {
	return e.claimFrom(ctx, workerID, wait, claimSource{kind: kind, offer: e.claim, withdraw: e.withdraw})
}

// claimSource is where a claim waits for a step: how its waiter is
// offered to the loop and taken back. The shared ready queue (Claim) or
// one local job's steps (ClaimJob).
type claimSource struct {
	kind     StepKind
	offer    func(b *batch, w *waiter, park bool)
	withdraw func(w *waiter) bool
}

// claimFrom claims from src, rendering the claimed step's action spec off
// the loop; a step whose spec fails to render fails, and the claim looks
// once more without waiting.
func (e *Engine) claimFrom(ctx context.Context, workerID string, wait time.Duration, src claimSource) (*Claim, error) {
	for {
		r := e.claimOnce(ctx, workerID, wait, src)
		if r.err != nil || r.claim == nil || r.render == nil {
			return r.claim, r.err
		}
		c := r.claim
		err := e.pool.run(func(ctx context.Context) error { return r.render(ctx, c) })
		if err == nil {
			return c, nil
		}
		_, ferr := e.doDetached(func(b *batch) (any, error) {
			e.failClaimed(b, workerID, c.JobID, c.StepName, err.Error())
			return nil, nil
		})
		if ferr != nil {
			return nil, ferr
		}
		wait = 0
	}
}

// failClaimed fails a step whose action spec did not render, if the
// worker still holds it and has not started it.
func (e *Engine) failClaimed(b *batch, workerID, jobID, name, msg string) {
	if js, ss, ok := e.claimedUnstarted(workerID, jobID, name); ok {
		e.unhold(ss)
		e.fail(b, js, ss, msg)
	}
}

// claimedUnstarted finds a step of a live job that the worker claimed and
// has not started.
func (e *Engine) claimedUnstarted(workerID, jobID, name string) (*jobState, *stepState, bool) {
	js, ok := e.st.jobs[jobID]
	if !ok || js.job.Terminal() {
		return nil, nil, false
	}
	ss, ok := js.steps[name]
	if !ok || ss.rec.Status != StepRunning || ss.rec.StartedAt != nil && !ss.rec.Unconfirmed ||
		ss.rec.WorkerID == nil || *ss.rec.WorkerID != workerID {
		return nil, nil, false
	}
	return js, ss, true
}

func (e *Engine) claimOnce(ctx context.Context, workerID string, wait time.Duration, src claimSource) claimResult {
	return e.claimOnceWith(ctx, workerID, wait, src, nil)
}

// claimOnceWith is claimOnce with the waiter set up by setup (if not nil).
func (e *Engine) claimOnceWith(ctx context.Context, workerID string, wait time.Duration, src claimSource, setup func(*waiter)) claimResult {
	w := newWaiter(workerID)
	w.kind = src.kind
	if setup != nil {
		setup(w)
	}
	park := wait > 0
	err := e.send(ctx, &command{apply: func(b *batch) (any, error) {
		src.offer(b, w, park)
		if !w.answered {
			w.got <- claimResult{parked: true}
		}
		return nil, nil
	}})
	if err != nil {
		return claimResult{err: err}
	}
	// The loop answers, or parks the claim, in the turn that took it.
	select {
	case r := <-w.got:
		if !r.parked {
			return r
		}
	case <-e.stopped:
		return lastWord(w)
	}
	expired := make(chan struct{})
	t := e.clock.AfterFunc(wait, func() { close(expired) })
	defer t.Stop()
	select {
	case r := <-w.got:
		return r
	case <-e.stopped:
		return lastWord(w)
	case <-ctx.Done():
	case <-expired:
	}
	// Giving up races with the loop handing this waiter a step: ask the
	// loop, which knows whether it did.
	v, err := e.doDetached(func(*batch) (any, error) { return src.withdraw(w), nil })
	if err != nil {
		return lastWord(w)
	}
	if !v.(bool) {
		return claimResult{err: ctx.Err()}
	}
	r := <-w.got // delivered before the withdraw was answered
	if r.err != nil || r.claim == nil || ctx.Err() == nil {
		return r
	}
	// Nobody is left to run them: put them back.
	claims := []*Claim{r.claim}
	if r.many != nil {
		claims = claims[:0]
		for _, m := range r.many {
			claims = append(claims, m.claim)
		}
	}
	_, _ = e.doDetached(func(b *batch) (any, error) {
		for _, c := range claims {
			e.release(b, workerID, c.JobID, c.StepName)
		}
		return nil, nil
	})
	return claimResult{err: ctx.Err()}
}

// lastWord is what a claim returns once the engine stopped: a claim the
// loop answered before stopping, else no work.
func lastWord(w *waiter) claimResult {
	for {
		select {
		case r := <-w.got:
			if r.parked {
				continue
			}
			return r
		default:
			return claimResult{}
		}
	}
}

// claim answers a claim from the ready index, or parks it.
func (e *Engine) claim(b *batch, w *waiter, park bool) {
	wk, ok := e.st.workers[w.workerID]
	if !ok {
		b.deliver(w, nil, fmt.Errorf("worker %s: %w", w.workerID, ErrNotFound))
		return
	}
	if w.tags == nil {
		w.tags = tagSet(wk.rec.Tags)
	}
	if wk.rec.Status != WorkerActive {
		// It is evidently alive; a claim counts as a heartbeat for it.
		e.touchWorker(b, wk)
	}
	for {
		ss := e.st.ready.take(w.tags, w.kind)
		if ss == nil {
			break
		}
		js := e.st.jobs[ss.rec.JobID]
		e.hand(b, js, ss, wk, w)
		if !w.many {
			return
		}
		if len(w.took) == w.max {
			break
		}
	}
	if len(w.took) > 0 {
		b.settle(w)
		return
	}
	if !park {
		b.deliver(w, nil, nil)
		return
	}
	e.st.waiters.park(w)
}

// offer hands a newly ready step to the longest-waiting claim that may run
// it, in the same batch as the promotion, or files it in the ready index.
func (e *Engine) offer(b *batch, js *jobState, ss *stepState) {
	if localHolder(js.job) != "" {
		e.offerLocal(b, js, ss)
		return
	}
	consumer := isConsumer(js)
	if w := e.st.waiters.firstMatch(ss.rec.RequiredTags, consumer, b.reporting); w != nil {
		e.st.waiters.remove(w)
		e.hand(b, js, ss, e.st.workers[w.workerID], w)
		if w.many {
			b.settle(w)
		}
		return
	}
	e.st.ready.push(ss, consumer)
	if b.reporting != "" {
		b.kept = append(b.kept, keptStep{js, ss})
	}
	e.checkClaimable(b, js, ss)
}

// offerKept offers again the steps kept from the reporting worker's
// parked claims (see ClaimStepsReporting) that its claim left ready;
// b.reporting is cleared by then, so they may go to any claim.
func (e *Engine) offerKept(b *batch) {
	for _, k := range b.kept {
		if k.ss.inReady && k.ss.rec.Status == StepReady {
			e.st.ready.remove(k.ss)
			e.offer(b, k.js, k.ss)
		}
	}
	b.kept = nil
}

// hand moves a step to running, held by the waiter's worker, and gives
// the waiter the claim with what it needs to render the action spec.
func (e *Engine) hand(b *batch, js *jobState, ss *stepState, wk *workerState, w *waiter) {
	c, render := e.claimFor(js, ss)
	if ss.rec.ReadyAt != nil {
		e.metrics.StepClaimed(b.now.Sub(*ss.rec.ReadyAt))
	}
	id := wk.rec.ID
	ss.rec.Status = StepRunning
	ss.rec.WorkerID = &id
	ss.rec.Deadline = nil
	if ss.flow.Timeout > 0 {
		c.Timeout = time.Duration(ss.flow.Timeout)
		d := b.now.Add(c.Timeout)
		ss.rec.Deadline = &d
		b.afterCommit(func() { e.armStepTimer(js, ss) })
	}
	if w.many || wk.rec.InProcess {
		// Started with its claim, unconfirmed until its worker says it
		// has it. A claim of several is answered once durable: the worker
		// runs the steps at once (see ClaimSteps). An in-process worker
		// runs its step at once too, and the step cannot outlive the
		// server, so its start report needs no commit of its own (see
		// StartStepApplied): the pool's claims wait parked, so along a
		// chain the next step's start rides the commit of the result that
		// made it ready. An unconfirmed step whose claim was given up is
		// put back (release).
		now := b.now
		ss.rec.StartedAt = &now
		ss.rec.Unconfirmed = true
		e.markJobStarted(b, js)
		b.dirtyStep(ss.rec)
	} else {
		e.st.claimed = append(e.st.claimed, ss.rec) // written with the next commit (see state.claimed)
	}
	wk.running[ss] = b.now
	e.holders.hold(ss, id)
	w.assigned = true
	if w.many {
		w.took = append(w.took, claimResult{claim: c, render: render})
		return
	}
	b.answer(w, claimResult{claim: c, render: render})
}

// withdraw takes a giving-up claim out of the queue and reports whether the
// loop had already handed it a step.
func (e *Engine) withdraw(w *waiter) bool {
	if w.elem != nil {
		e.st.waiters.remove(w)
		return false
	}
	return w.assigned
}

// release puts a claimed step that its worker never started back to ready.
func (e *Engine) release(b *batch, workerID, jobID, name string) {
	js, ss, ok := e.claimedUnstarted(workerID, jobID, name)
	if !ok {
		return
	}
	e.unhold(ss)
	ss.rec.Status = StepReady
	ss.rec.WorkerID = nil
	ss.rec.StartedAt = nil
	ss.rec.Unconfirmed = false
	ss.rec.Deadline = nil
	b.dirtyStep(ss.rec)
	e.offer(b, js, ss)
}

// unhold detaches a step from the worker running it and its timeout.
func (e *Engine) unhold(ss *stepState) {
	stopTimer(&ss.timer)
	ss.rec.Unconfirmed = false
	if ss.rec.WorkerID == nil {
		return
	}
	if wk, ok := e.st.workers[*ss.rec.WorkerID]; ok {
		delete(wk.running, ss)
	}
	e.holders.drop(ss)
}

// checkClaimable writes a `_server` line, once per step, when no active
// worker has the tags a ready step needs: it will wait until one joins.
func (e *Engine) checkClaimable(b *batch, js *jobState, ss *stepState) {
	if ss.noWorkerLogged {
		return
	}
	for _, wk := range e.st.workers {
		if wk.rec.Status == WorkerActive && coversList(wk.rec.Tags, ss.rec.RequiredTags) {
			return
		}
	}
	ss.noWorkerLogged = true
	if len(ss.rec.RequiredTags) == 0 {
		b.serverLog(js.job.ID, fmt.Sprintf("step %q is ready; no worker is active", ss.rec.Name))
		return
	}
	b.serverLog(js.job.ID, fmt.Sprintf("step %q needs worker tags %v; no active worker has them", ss.rec.Name, ss.rec.RequiredTags))
}

func coversList(have, need []string) bool {
	for _, n := range need {
		found := false
		for _, h := range have {
			if h == n {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// claimFor builds a step's claim in the loop: its action_spec is a copy of
// the action, and render, when any field is a template, renders the copy
// in the step's scope, a snapshot taken here, off the loop.
func (e *Engine) claimFor(js *jobState, ss *stepState) (*Claim, func(ctx context.Context, c *Claim) error) {
	input := make(map[string]any, len(ss.rec.Input))
	for k, v := range ss.rec.Input {
		input[k] = v
	}
	a := *ss.action
	eventSource := e.withTriggerEnv(js, &a)
	c := &Claim{
		JobID:      js.job.ID,
		Workspace:  js.job.Workspace,
		Revision:   js.job.Revision,
		StepName:   ss.rec.Name,
		ActionName: ss.rec.ActionName,
		ActionType: ss.rec.ActionType,
		Runner:     ss.rec.Runner,
		Image:      a.Image,
		Spec:       &a,
		Input:      input,

		EventSource: eventSource,
	}
	if !specRenders(&a) {
		return c, nil
	}
	scope, set, names := e.stepScope(js, ss), js.ws.Templates, outputNames(js, ss)
	return c, func(ctx context.Context, c *Claim) error {
		return explainOutputRead(renderSpec(ctx, set, scope, c.Spec), names, scope)
	}
}

// specField is one of an action's templated text fields. A field that
// is a script (lang set) renders with its values quoted as data for that
// language.
type specField struct {
	name string
	s    *string
	lang quote.Lang
}

// specFields lists an action's templated text fields. A docker or pod
// cmd runs through `sh -c`: it is a shell script too.
func specFields(a *workflow.Action) []specField {
	return []specField{
		{"script", &a.Script, scriptLang(a)}, {"cmd", &a.Cmd, quote.Shell}, {"prompt", &a.Prompt, ""},
		{"system_prompt", &a.SystemPrompt, ""}, {"message", &a.Message, ""}, {"workdir", &a.Workdir, ""},
	}
}

// scriptLang is the language a script action's script is written in; the
// runners read no language as shell, and so does the quoting.
func scriptLang(a *workflow.Action) quote.Lang {
	if a.Language == "" {
		return quote.Shell
	}
	return quote.Lang(a.Language)
}

func specRenders(a *workflow.Action) bool {
	for _, f := range specFields(a) {
		if template.IsTemplate(*f.s) {
			return true
		}
	}
	return template.HasTemplate(a.Env) || template.HasTemplate(a.Command) || template.HasTemplate(a.Entrypoint)
}

// renderSpec renders the templated fields of a (a copy of the action) in
// scope.
func renderSpec(ctx context.Context, set *template.Set, scope map[string]any, a *workflow.Action) error {
	var firstErr error
	script := func(field, s string, lang quote.Lang) string {
		if firstErr != nil || !template.IsTemplate(s) {
			return s
		}
		var out string
		var err error
		if lang != "" {
			out, err = set.RenderScript(ctx, s, scope, lang)
		} else {
			out, err = set.RenderContext(ctx, s, scope)
		}
		if err != nil {
			firstErr = fmt.Errorf("render %s: %w", field, err)
		}
		return out
	}
	r := func(field, s string) string { return script(field, s, "") }
	// An argv like [sh, -c, "..."] holds a shell script.
	isScript := workflow.ShellScriptArgs(a.Entrypoint, a.Command)
	rl := func(field, s string, i int) string {
		if isScript[field+"["+strconv.Itoa(i)+"]"] {
			return script(fmt.Sprintf("%s[%d]", field, i), s, quote.Shell)
		}
		return r(fmt.Sprintf("%s[%d]", field, i), s)
	}
	for _, f := range specFields(a) {
		*f.s = script(f.name, *f.s, f.lang)
	}
	if a.Env != nil {
		env := make(map[string]string, len(a.Env))
		for k, v := range a.Env {
			env[k] = r("env."+k, v)
		}
		a.Env = env
	}
	a.Command = renderList(rl, "command", a.Command)
	a.Entrypoint = renderList(rl, "entrypoint", a.Entrypoint)
	return firstErr
}

func renderList(r func(field, s string, i int) string, field string, items []string) []string {
	if items == nil {
		return nil
	}
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = r(field, s, i)
	}
	return out
}
