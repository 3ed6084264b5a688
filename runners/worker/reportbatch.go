package worker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// maxReportBytes bounds the encoded results of one batch, well inside
// the server's request limit; a bigger result goes alone.
const maxReportBytes = 1 << 20

// reportBatcher sends the worker's step results: the first at once, and
// those that come while a request is on its way together in the next
// (POST /worker/reports), so the results due at once share a request and
// a commit, with no added wait. Each is answered on its own. A claim
// takes the queued results of its worker with it (see Client.ClaimSteps),
// and a result held for a slot's next claim (see resultPairer) is left to
// that claim: the sender does not take it.
type reportBatcher struct {
	c *Client

	mu    sync.Mutex
	queue []*pendingReport
	busy  bool // a sender runs
	// polls counts the claims on their way that carry no results (they may
	// wait for work) and the pauses between claims: while any is, a slot
	// with a held result claims on its own (see resultPairer).
	polls int
}

type pendingReport struct {
	workerID string
	step     workerproto.StepResult
	raw      json.RawMessage // step, encoded
	path     string          // of its own complete, and its body
	res      workerproto.Result
	done     chan error
	held     bool // for a claim, not the sender
}

// resultHold is a slot's step result held for the slot's next claim (see
// resultPairer).
type resultHold struct {
	queued chan struct{} // closed once the result is queued, or will not be
	once   sync.Once
	// Under the batcher's mu: released, no claim is to carry the result;
	// p, the result while held.
	released bool
	p        *pendingReport
}

func newResultHold() *resultHold { return &resultHold{queued: make(chan struct{})} }

// ready tells the slot waiting to claim that its result is queued (or
// will not be).
func (h *resultHold) ready() { h.once.Do(func() { close(h.queued) }) }

// complete sends one result as part of a batch and returns its answer.
// With h, the result is held for the worker's next claim, unless h was
// released.
func (b *reportBatcher) complete(ctx context.Context, workerID, jobID, step string, res workerproto.Result, h *resultHold) error {
	sr := workerproto.StepResult{JobID: jobID, StepName: step, Result: res}
	raw, err := json.Marshal(sr)
	if err != nil {
		if h != nil {
			h.ready()
		}
		return err
	}
	p := &pendingReport{workerID: workerID, step: sr, raw: raw, path: stepPath(jobID, step, "complete"), res: res, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, p)
	if h != nil && !h.released {
		p.held, h.p = true, p
	} else {
		b.wake()
	}
	b.mu.Unlock()
	if h != nil {
		h.ready()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wake starts a sender unless one runs; b.mu is held.
func (b *reportBatcher) wake() {
	if !b.busy {
		b.busy = true
		go b.send()
	}
}

// release sends h's result on its own unless a claim took it, and has a
// result reported after it go on its own; a slot waiting for h claims.
func (b *reportBatcher) release(h *resultHold) {
	b.mu.Lock()
	h.released = true
	if h.p != nil && h.p.held {
		h.p.held = false
		b.wake()
	}
	h.p = nil
	b.mu.Unlock()
	h.ready()
}

// holdNone sends the held results on their own and holds none until
// resume (see resultPairer).
func (b *reportBatcher) holdNone() (resume func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.startPoll()
	return b.polled
}

// polling reports whether a claim that may wait for work is on its way,
// or the worker pauses between claims.
func (b *reportBatcher) polling() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.polls > 0
}

// polled ends a claim without results, or a pause (see polls).
func (b *reportBatcher) polled() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.polls--
}

// startPoll counts a claim that may wait for work, or a pause (see
// polls), and has the sender take every held result meanwhile; b.mu is
// held.
func (b *reportBatcher) startPoll() {
	b.polls++
	n := 0
	for _, p := range b.queue {
		if p.held {
			p.held = false
			n++
		}
	}
	if n > 0 {
		b.wake()
	}
}

// send sends what is queued, one batch after the other, until nothing is.
func (b *reportBatcher) send() {
	for {
		batch := b.take()
		if batch == nil {
			return
		}
		var ans workerproto.ReportAnswers
		items := make([]json.RawMessage, len(batch))
		for i, p := range batch {
			items[i] = p.raw
		}
		err := b.c.call(context.Background(), batch[0].workerID, "report results", http.MethodPost, "/worker/reports", nil,
			requestTimeout, struct {
				Results []json.RawMessage `json:"results"`
			}{items}, &ans)
		if se := (*StatusError)(nil); errors.As(err, &se) && noRoute(se) {
			// No such route: a server older than this worker. Each result
			// goes on its own, as the interface has it.
			for _, p := range batch {
				p.done <- b.c.call(context.Background(), p.workerID, "complete step", http.MethodPost, p.path, nil, requestTimeout, p.res, nil)
			}
			continue
		}
		if err == nil && len(ans.Results) != len(batch) {
			err = &StatusError{Op: "report results", Status: http.StatusBadGateway, Message: "the server answered a different number of results"}
		}
		for i, p := range batch {
			if err != nil {
				p.done <- err
				continue
			}
			p.done <- answerError(ans.Results[i])
		}
	}
}

// take takes the next batch: queued results of the first one's worker (a
// request proves one worker), at most MaxReports of maxReportBytes in all
// (at least one), none held for a claim; nil when none is queued, and
// the sender stops.
func (b *reportBatcher) take() []*pendingReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.queue {
		if !p.held {
			return b.takeOf(p.workerID, false)
		}
	}
	b.busy = false
	return nil
}

// forClaim takes queued results of workerID, held ones too, for a claim
// to carry (see Client.ClaimSteps): they then share its request and its
// commit. With none (or carry false), the claim may wait for work: it is
// counted in polls until polled is called, and held results left of
// another worker id go on their own.
func (b *reportBatcher) forClaim(workerID string, carry bool) []*pendingReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	if carry {
		if batch := b.takeOf(workerID, true); len(batch) > 0 {
			return batch
		}
	}
	b.startPoll()
	return nil
}

// toCarry takes queued results of workerID, held ones too, for a claim
// that goes only if it carries some (see Client.claimCarrying).
func (b *reportBatcher) toCarry(workerID string) []*pendingReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeOf(workerID, true)
}

// settle answers the results a claim carried with the claim's answers;
// when the claim failed, they go back to the queue, for the sender.
func (b *reportBatcher) settle(batch []*pendingReport, ans []workerproto.ReportAnswer, err error) {
	if err != nil {
		b.mu.Lock()
		b.queue = append(batch, b.queue...)
		b.wake()
		b.mu.Unlock()
		return
	}
	for i, p := range batch {
		if i < len(ans) {
			p.done <- answerError(ans[i])
		} else {
			p.done <- &StatusError{Op: "report results", Status: http.StatusBadGateway, Message: "the server answered fewer results than the claim carried"}
		}
	}
}

// takeOf takes the queued results of one worker, as take does, held
// ones only if held; b.mu is held.
func (b *reportBatcher) takeOf(who string, held bool) []*pendingReport {
	var batch []*pendingReport
	rest := b.queue[:0]
	size := 0
	for _, p := range b.queue {
		if p.workerID != who || p.held && !held || len(batch) == workerproto.MaxReports || len(batch) > 0 && size+len(p.raw) > maxReportBytes {
			rest = append(rest, p)
			continue
		}
		p.held = false
		batch = append(batch, p)
		size += len(p.raw)
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	return batch
}

// answerError is the error a report's answer means, as its own complete
// would have returned it.
func answerError(a workerproto.ReportAnswer) error {
	if a.Status/100 == 2 {
		return nil
	}
	return newStatusError("complete step", "/complete", a.Status, a.Error)
}
