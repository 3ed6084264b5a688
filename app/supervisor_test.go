package app

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A component asked to stop is no failure, whatever it returns for it;
// one that returns unasked, even with no error, fails the supervisor,
// named in the error.
func TestSupervisorFailsOnAComponentThatStopsByItself(t *testing.T) {
	sv := newSupervisor()
	stopped := sv.start("asked", func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	stopped.stop()
	select {
	case <-sv.failed.Done():
		t.Fatal("a component stopped on request failed the supervisor")
	default:
	}

	sv.start("quitter", func(context.Context) error { return nil })
	select {
	case <-sv.failed.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a component that returned unasked did not fail the supervisor")
	}
	if err := sv.wait(); !errors.Is(err, errStoppedByItself) || err.Error() != "quitter: stopped by itself" {
		t.Fatalf("wait: %v, want quitter: stopped by itself", err)
	}
}

func TestSupervisorReportsTheFirstFailure(t *testing.T) {
	sv := newSupervisor()
	boom := errors.New("boom")
	other := sv.start("other", func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	sv.start("broken", func(context.Context) error { return boom })
	<-sv.failed.Done()
	other.stop()
	if err := sv.wait(); !errors.Is(err, boom) || err.Error() != "broken: boom" {
		t.Fatalf("wait: %v, want broken: boom", err)
	}
}
