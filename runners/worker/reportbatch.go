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
	raw      json.RawMessage // the encoded workerproto.StepResult
	path     string          // of its own complete, and its body
	res      workerproto.Result
	done     chan error
}

// complete sends one result as part of a batch and returns its answer.
func (b *reportBatcher) complete(ctx context.Context, workerID, jobID, step string, res workerproto.Result) error {
	raw, err := json.Marshal(workerproto.StepResult{JobID: jobID, StepName: step, Result: res})
	if err != nil {
		return err
	}
	p := &pendingReport{workerID: workerID, raw: raw, path: stepPath(jobID, step, "complete"), res: res, done: make(chan error, 1)}
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
// (at least one); nil when none is queued, and the sender stops.
func (b *reportBatcher) take() []*pendingReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		return nil
	}
	who := b.queue[0].workerID
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
