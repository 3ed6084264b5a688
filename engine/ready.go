package engine

import (
	"container/heap"
	"strings"
)

// readyIndex holds the ready steps in buckets keyed by their required tag
// set, each a FIFO (a heap on ready order). A claim with tags T looks only
// at the buckets whose tag set is within T and takes the oldest head, so it
// costs O(buckets), never a scan of jobs.
type readyIndex struct {
	buckets map[string]*bucket
	order   uint64
}

type bucket struct {
	tags []string
	// consumer: the bucket holds steps of event sources' consumer jobs,
	// which claims can ask for, or leave, apart (StepKind).
	consumer bool
	entries  entryHeap
}

// entry is a step's place in a bucket. Removal is lazy: an entry whose
// generation no longer matches its step is skipped when it reaches the head.
type entry struct {
	ss    *stepState
	order uint64
	gen   uint64
}

func newReadyIndex() *readyIndex { return &readyIndex{buckets: map[string]*bucket{}} }

// push adds a ready step. A step released back to ready keeps its original
// order, so it goes back to the front of its bucket.
func (r *readyIndex) push(ss *stepState, consumer bool) {
	if ss.readyOrder == 0 {
		r.order++
		ss.readyOrder = r.order
	}
	ss.readyGen++
	ss.inReady = true
	key := strings.Join(ss.rec.RequiredTags, "\x00")
	if consumer {
		key = "\x01consumer\x00" + key
	}
	bk, ok := r.buckets[key]
	if !ok {
		bk = &bucket{tags: ss.rec.RequiredTags, consumer: consumer}
		r.buckets[key] = bk
	}
	heap.Push(&bk.entries, entry{ss: ss, order: ss.readyOrder, gen: ss.readyGen})
}

// remove drops a step from the index (cancelled or failed while ready).
func (r *readyIndex) remove(ss *stepState) { ss.inReady = false }

// take removes and returns the oldest ready step of kind whose required
// tags are all in tags, or nil.
func (r *readyIndex) take(tags map[string]bool, kind StepKind) *stepState {
	var best *bucket
	var bestKey string
	for key, bk := range r.buckets {
		head := bk.head()
		if head == nil {
			delete(r.buckets, key)
			continue
		}
		if !covers(tags, bk.tags) || !kind.admits(bk.consumer) {
			continue
		}
		if best == nil || head.order < best.entries[0].order {
			best, bestKey = bk, key
		}
	}
	if best == nil {
		return nil
	}
	e := heap.Pop(&best.entries).(entry)
	if best.head() == nil {
		delete(r.buckets, bestKey)
	}
	e.ss.inReady = false
	return e.ss
}

// len counts the live entries (for tests and metrics).
func (r *readyIndex) len() int {
	n := 0
	for _, bk := range r.buckets {
		for _, e := range bk.entries {
			if e.valid() {
				n++
			}
		}
	}
	return n
}

// head drops stale entries and returns the oldest live one.
func (bk *bucket) head() *entry {
	for len(bk.entries) > 0 {
		if bk.entries[0].valid() {
			return &bk.entries[0]
		}
		heap.Pop(&bk.entries)
	}
	return nil
}

func (e entry) valid() bool { return e.ss.inReady && e.ss.readyGen == e.gen }

// covers reports whether a worker with tags have may run a step requiring need.
func covers(have map[string]bool, need []string) bool {
	for _, t := range need {
		if !have[t] {
			return false
		}
	}
	return true
}

func tagSet(tags []string) map[string]bool {
	m := make(map[string]bool, len(tags))
	for _, t := range tags {
		m[t] = true
	}
	return m
}

type entryHeap []entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].order < h[j].order }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = entry{}
	*h = old[:len(old)-1]
	return x
}
