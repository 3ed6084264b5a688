package scheduler

import "time"

// Clock is the scheduler's source of time; tests fake it so that fire
// times are exact and nothing sleeps.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that delivers once on C after d (at once
	// when d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a pending one-shot timer.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// RealClock is wall time and time.Timer.
type RealClock struct{}

// Now returns the current time in UTC.
func (RealClock) Now() time.Time { return time.Now().UTC() }

// NewTimer starts a time.Timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
