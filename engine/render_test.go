package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
)

// A render that ignores its deadline (gonja stuck in one long step) is
// reported at the time limit but keeps its slot until it returns, and a
// render that finds every slot taken fails after waiting ten times the
// time limit rather than queueing forever.
func TestRenderPoolBoundsAbandonedRenders(t *testing.T) {
	lim := template.Limits{Time: 200 * time.Millisecond, Output: 1 << 20}
	p := newRenderPool(lim, 1)
	release := make(chan struct{})
	defer close(release)

	start := time.Now()
	err := p.run(func(context.Context) error { <-release; return nil })
	if !errors.Is(err, template.ErrLimit) || !strings.Contains(err.Error(), "limits.template_time (200ms)") {
		t.Fatalf("stuck render: err = %v, want the time limit", err)
	}
	if d := time.Since(start); d > lim.Time+5*time.Second {
		t.Fatalf("stuck render reported after %v", d)
	}

	start = time.Now()
	ran := false
	err = p.run(func(context.Context) error { ran = true; return nil })
	if err == nil || ran || !strings.Contains(err.Error(), "no template render slot came free within 2s (10 × limits.template_time)") {
		t.Fatalf("render without a slot: ran %v, err = %v", ran, err)
	}
	if d := time.Since(start); d < slotWaits*lim.Time {
		t.Fatalf("gave up after %v, before waiting %v", d, slotWaits*lim.Time)
	}
}

func TestRenderPoolFreesTheSlotOfAFinishedRender(t *testing.T) {
	p := newRenderPool(template.Limits{Time: time.Second, Output: 1 << 20}, 1)
	for i := range 3 {
		if err := p.run(func(ctx context.Context) error {
			_, err := template.NewSet().RenderContext(ctx, "{{ 'a' * 2000000 }}", nil)
			if !errors.Is(err, template.ErrLimit) {
				return errors.New("the render context carries no output limit")
			}
			return nil
		}); err != nil {
			t.Fatalf("render %d: %v", i, err)
		}
	}
}
