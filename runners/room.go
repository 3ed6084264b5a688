package runners

import "sync"

// room is how a full journal holds back the reader of a step's output
// instead of dropping lines: the reader waits for freed, which delivery
// closes each time the server takes lines, and closes wanted on the way, so
// delivery pushes at once rather than at its next tick. While the reader
// waits the step's pipe fills and the step blocks on its writes: back-
// pressure, down to the step's own process.
type room struct {
	mu     sync.Mutex
	freed  chan struct{}
	wanted chan struct{}
}

func newRoom() *room {
	return &room{freed: make(chan struct{}), wanted: make(chan struct{})}
}

// next is the channel closed at the next free; take it before checking for
// room, so a free between the check and the wait is not missed.
func (r *room) next() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.freed
}

// free wakes the writers waiting for room.
func (r *room) free() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.freed)
	r.freed = make(chan struct{})
}

// want is the channel closed when a writer next waits for room; take it
// before a delivery attempt, so a wait during the attempt is not missed.
func (r *room) want() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wanted
}

// waiting tells delivery that a writer waits for room.
func (r *room) waiting() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.wanted)
	r.wanted = make(chan struct{})
}
