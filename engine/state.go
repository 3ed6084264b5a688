package engine

import (
	"sync"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// state is everything the loop owns: every non-terminal job with its steps,
// every worker, the ready index and the parked claims.
type state struct {
	jobs    map[string]*jobState
	workers map[string]*workerState
	ready   *readyIndex
	waiters *waiterQueue
	// hooking holds the ended jobs whose hook inputs render in the pool:
	// a render's result applies only while its job is still here, so one
	// that comes back after a reload (which fires the hooks again from
	// the store) is dropped.
	hooking map[string]*jobState
	events  eventMemory // event sources' marks (see Emit)
	// claimed holds the step records that remote workers' claims of one
	// changed since the last commit. A claim is answered from memory: it
	// needs no commit of its own, since such a worker runs a step only once
	// its start report is durable, and a claim lost to a crash leaves the
	// step ready (the start report is then refused). Each is written with
	// the next commit, normally its start report's. (An in-process claim
	// records its step's start in its own batch: see hand.)
	claimed []*Step
	// agentsInFlight counts the agent calls holding a slot (at most
	// Config.AgentSlots); agentQueue holds the calls waiting for one.
	agentsInFlight int
	agentQueue     []*agentCall
	// slots is the concurrency limits in use (queues.go).
	slots *slotIndex
}

func newState() *state {
	return &state{
		jobs:    map[string]*jobState{},
		workers: map[string]*workerState{},
		ready:   newReadyIndex(),
		waiters: newWaiterQueue(),
		hooking: map[string]*jobState{},
		slots:   newSlotIndex(),
	}
}

// jobState is a live job: its record, the workspace revision it runs on and
// its step records, linked as the task's DAG.
type jobState struct {
	job   *Job
	ws    *workflow.Workspace
	task  *workflow.Task
	steps map[string]*stepState // by record name, instances included
	flow  []*stepState          // flow step records in Seq order
	timer Timer                 // task timeout
	// localWaiters are the parked claims of a local job's holder (local.go).
	localWaiters []*waiter
	// upstream caches each flow step's transitive dependencies: the steps
	// whose outputs its templates may reference.
	upstream map[string][]string
	// reuse holds, for a re-run from the failed steps, the old job's
	// completed for_each instances by flow step and index until that step
	// expands (see rerun.go).
	reuse map[string]map[int]*Step
	// secrets is the job's secret values (secretSet), gathered once and
	// then added to as step inputs resolve; shared with the registry.
	secrets     *secretSet
	secretsOnce sync.Once
	// within is the limits the job runs within, held by an ancestor (or
	// the job that fired a hook job): it needs no slot of them.
	within []string
}

// stepState is one step record and what the loop needs to move it on.
type stepState struct {
	rec        *Step
	flow       *workflow.FlowStep
	action     *workflow.Action
	deps       []*stepState // flow step records this one waits for
	dependents []*stepState
	parent     *stepState   // for_each parent of an instance
	instances  []*stepState // for_each instances, by index
	settled    int          // instances[:settled] are terminal (instanceDone)
	timer      Timer        // step timeout while running
	agent      *agentCall   // an agent step's call in flight

	// rendering is set while the pool renders the step's templates
	// (renderOff); renderGen tells that render's result from a stale one.
	rendering bool
	renderGen uint64

	readyOrder     uint64 // FIFO position in the ready index, kept on release
	readyGen       uint64 // invalidates stale index entries
	inReady        bool
	noWorkerLogged bool
}

// workerState is a registered worker and the steps it holds, with when it
// claimed each (zero when loaded at start-up).
type workerState struct {
	rec     *Worker
	timer   Timer // heartbeat timeout of a remote worker
	running map[*stepState]time.Time
}

func (s *state) stopTimers() {
	for _, js := range s.jobs {
		stopTimer(&js.timer)
		for _, ss := range js.steps {
			stopTimer(&ss.timer)
			ss.abortAgent()
		}
	}
	for _, w := range s.workers {
		stopTimer(&w.timer)
	}
}

func stopTimer(t *Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// isInstance reports whether the record is a for_each instance.
func (ss *stepState) isInstance() bool { return ss.parent != nil }

func (ss *stepState) terminal() bool { return StepTerminal(ss.rec.Status) }

// allDepsTerminal reports whether a pending flow step can be evaluated.
func (ss *stepState) allDepsTerminal() bool {
	for _, d := range ss.deps {
		if !d.terminal() {
			return false
		}
	}
	return true
}
