package engine

import "sync"

// QueuedCommands counts commands waiting for the loop, or applied and
// waiting for the write before theirs (tests only).
func (e *Engine) QueuedCommands() int { return len(e.cmds) + int(e.held.Load()) }

// HoldLoop blocks the loop in a command until release is called (tests
// only): commands sent meanwhile queue up, and are then applied together.
func (e *Engine) HoldLoop() (release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	e.post(func(*batch) (any, error) {
		close(in)
		<-out
		return nil, nil
	})
	<-in
	return sync.OnceFunc(func() { close(out) })
}

// ReadySteps counts the steps in the ready index (tests only).
func (e *Engine) ReadySteps() int {
	v, err := e.doDetached(func(*batch) (any, error) { return e.st.ready.len(), nil })
	if err != nil {
		return -1
	}
	return v.(int)
}

// HoldRenders keeps every template render from starting until release is
// called (tests only): a test can then act while a render's result is
// still to be applied.
func (e *Engine) HoldRenders() (release func()) {
	hold := make(chan struct{})
	e.pool.mu.Lock()
	e.pool.hold = hold
	e.pool.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.pool.mu.Lock()
			e.pool.hold = nil
			e.pool.mu.Unlock()
			close(hold)
		})
	}
}
