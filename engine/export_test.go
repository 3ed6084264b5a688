package engine

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
