package engine

import "time"

// realClock is the production Clock: wall time and time.AfterFunc.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now().UTC() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
