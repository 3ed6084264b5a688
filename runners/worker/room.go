package worker

import "sync"

// room is how a full journal holds back the reader of a step's output
// instead of dropping lines: the reader waits for freed, which delivery
// fires each time the server takes lines, and fires wanted on the way, so
// delivery pushes at once rather than at its next tick. While the reader
// waits the step's pipe fills and the step blocks on its writes: back-
// pressure, down to the step's own process.
type room struct {
	freed, wanted signal
}

func newRoom() *room { return &room{} }

// next is the channel closed at the next free; take it before checking for
// room, so a free between the check and the wait is not missed.
func (r *room) next() <-chan struct{} { return r.freed.next() }

// free wakes the writers waiting for room.
func (r *room) free() { r.freed.fire() }

// want is the channel closed when a writer next waits for room; take it
// before a delivery attempt, so a wait during the attempt is not missed.
func (r *room) want() <-chan struct{} { return r.wanted.next() }

// waiting tells delivery that a writer waits for room.
func (r *room) waiting() { r.wanted.fire() }

// signal is an event that can be awaited: next is a channel closed at the
// next fire.
type signal struct {
	mu sync.Mutex
	ch chan struct{} // nil until someone takes it: a fire nobody awaits costs nothing
}

func (s *signal) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
