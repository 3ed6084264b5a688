package engine

import "sync"

// QueuedCommands counts commands waiting for the loop (tests only).
func (e *Engine) QueuedCommands() int { return len(e.cmds) }

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
