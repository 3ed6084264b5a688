package logtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

func testSubscribeMidStream(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	const n, tail, viewers = 2000, 100, 4
	subscriberBuffer(t, l, n) // this test is about gaps, not about dropping slow viewers
	release := make([]chan struct{}, viewers)
	subscribed := make(chan struct{}, viewers)
	for i := range release {
		release[i] = make(chan struct{})
	}
	type result struct{ backfill, updates []byte }
	results := make([]result, viewers)
	var wg sync.WaitGroup
	for v := range viewers {
		wg.Go(func() {
			<-release[v]
			backfill, updates, cancel, err := l.Subscribe("j", engine.LogQuery{})
			subscribed <- struct{}{}
			if err != nil {
				t.Errorf("Subscribe: %v", err)
				return
			}
			defer cancel()
			results[v] = result{readBackfill(t, backfill), drain(t, updates)}
		})
	}
	// Viewer v is released before line v*n/viewers while the writer keeps
	// appending; the last tail lines wait until all have subscribed, so
	// every viewer joins strictly mid-stream.
	for i := range n {
		if i%(n/viewers) == 0 {
			close(release[i/(n/viewers)])
		}
		if i == n-tail {
			for range viewers {
				<-subscribed
			}
		}
		appendLines(t, l, "j", line("s", fmt.Sprint(i)))
	}
	l.Finish("j")
	wg.Wait()

	for v, r := range results {
		back, upd := lineTexts(t, r.backfill), lineTexts(t, r.updates)
		if len(back) < v*n/viewers || len(upd) < tail {
			t.Errorf("viewer %d: %d backfill + %d update lines; want >= %d + >= %d", v, len(back), len(upd), v*n/viewers, tail)
		}
		got := append(back, upd...)
		if len(got) != n {
			t.Errorf("viewer %d saw %d lines, want %d", v, len(got), n)
			continue
		}
		for i, text := range got {
			if text != fmt.Sprint(i) {
				t.Errorf("viewer %d: line %d is %q, want %d (gap or duplicate)", v, i, text, i)
				break
			}
		}
	}
}

func testSlowSubscriber(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	subscriberBuffer(t, l, 4)
	_, slow, cancelSlow, err := l.Subscribe("j", engine.LogQuery{})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer cancelSlow()
	_, fast, cancelFast, err := l.Subscribe("j", engine.LogQuery{})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer cancelFast()

	const appends = 10
	for i := range appends {
		// Append returns although slow never reads: it cannot block.
		appendLines(t, l, "j", line("s", fmt.Sprint(i)))
		c, ok := receive(t, fast)
		if !ok || !strings.Contains(string(c), fmt.Sprintf(`"line":"%d"`, i)) {
			t.Fatalf("fast viewer chunk %d = %q (open %v)", i, c, ok)
		}
	}
	if got := lineTexts(t, drain(t, slow)); strings.Join(got, ",") != "0,1,2,3" {
		t.Errorf("slow viewer got %v before being dropped, want its buffer [0 1 2 3]", got)
	}
	l.Finish("j")
	if c, ok := receive(t, fast); ok {
		t.Errorf("fast viewer got %q after Finish, want closed", c)
	}
}

func testFinishCloses(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	appendLines(t, l, "j", line("s", "old"))
	backfill, updates, cancel, err := l.Subscribe("j", engine.LogQuery{})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	for i := range 3 {
		appendLines(t, l, "j", line("s", fmt.Sprint(i)))
	}
	l.Finish("j")
	if got := lineTexts(t, readBackfill(t, backfill)); strings.Join(got, ",") != "old" {
		t.Errorf("backfill = %v, want [old]", got)
	}
	if got := lineTexts(t, drain(t, updates)); strings.Join(got, ",") != "0,1,2" {
		t.Errorf("updates = %v, want [0 1 2] then closed", got)
	}
	cancel()
	cancel() // idempotent, also after Finish
}

func testCancel(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	backfill, updates, cancel, err := l.Subscribe("quiet", engine.LogQuery{})
	if err != nil || len(readBackfill(t, backfill)) != 0 {
		t.Fatalf("Subscribe: %v; want an empty backfill", err)
	}
	cancel()
	if _, ok := receive(t, updates); ok {
		t.Error("channel still open after cancel")
	}
	appendLines(t, l, "quiet", line("s", "later")) // no subscriber to feed: must not panic
	if got := read(t, l, "quiet", ""); !strings.Contains(got, "later") {
		t.Errorf("log = %q; want the line appended after the viewer left", got)
	}
}

func testClose(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	var chans []<-chan []byte
	for _, id := range []string{"a", "b"} {
		appendLines(t, l, id, line("s", id))
		_, ch, cancel, err := l.Subscribe(id, engine.LogQuery{})
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		defer cancel()
		chans = append(chans, ch)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, ch := range chans {
		if _, ok := receive(t, ch); ok {
			t.Errorf("subscription %d still open after Close", i)
		}
	}
}
