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
// a commit, with no added wait. Each is answered on its own.
type reportBatcher struct {
	c *Client

	mu    sync.Mutex
	queue []*pendingReport
	busy  bool // a sender runs
}

type pendingReport struct {
	workerID string
	step     workerproto.StepResult
	raw      json.RawMessage // step, encoded
	path     string          // of its own complete, and its body
	res      workerproto.Result
	done     chan error
}

// complete sends one result as part of a batch and returns its answer.
func (b *reportBatcher) complete(ctx context.Context, workerID, jobID, step string, res workerproto.Result) error {
	sr := workerproto.StepResult{JobID: jobID, StepName: step, Result: res}
	raw, err := json.Marshal(sr)
	if err != nil {
		return err
	}
	p := &pendingReport{workerID: workerID, step: sr, raw: raw, path: stepPath(jobID, step, "complete"), res: res, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, p)
	if !b.busy {
		b.busy = true
		go b.send()
	}
	b.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
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
		if se := (*StatusError)(nil); errors.As(err, &se) && se.Status == http.StatusNotFound {
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
// (at least one); nil when none is queued, and the sender stops.
func (b *reportBatcher) take() []*pendingReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		return nil
	}
	return b.takeOf(b.queue[0].workerID)
}

// steal takes queued results of workerID for a claim to carry (see
// Client.ClaimSteps): they then share its request and its commit.
func (b *reportBatcher) steal(workerID string) []*pendingReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeOf(workerID)
}

// settle answers the results a claim carried with the claim's answers;
// when the claim failed, they go back to the queue, for the sender.
func (b *reportBatcher) settle(batch []*pendingReport, ans []workerproto.ReportAnswer, err error) {
	if err != nil {
		b.mu.Lock()
		b.queue = append(batch, b.queue...)
		start := !b.busy
		b.busy = true
		b.mu.Unlock()
		if start {
			go b.send()
		}
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

// takeOf takes the queued results of one worker, as take does; b.mu is
// held.
func (b *reportBatcher) takeOf(who string) []*pendingReport {
	var batch []*pendingReport
	rest := b.queue[:0]
	size := 0
	for _, p := range b.queue {
		if p.workerID != who || len(batch) == workerproto.MaxReports || len(batch) > 0 && size+len(p.raw) > maxReportBytes {
			rest = append(rest, p)
			continue
		}
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
