package engine

// wakeAudit makes sure a commit comes for entries pushed to the audit
// queue (Config.Audit) while the loop is idle: it queues one empty
// command, unless one is queued already or the command queue is full
// (then a commit is coming anyway, and every commit takes the queue, see
// prepareCommit). It never blocks: the queue's pushers are request
// handlers refusing a flood.
func (e *Engine) wakeAudit() {
	if !e.auditWoken.CompareAndSwap(false, true) {
		return
	}
	c := &command{apply: func(*batch) (any, error) {
		e.auditWoken.Store(false)
		return nil, nil
	}}
	select {
	case e.cmds <- c:
	default:
		e.auditWoken.Store(false)
	}
}
