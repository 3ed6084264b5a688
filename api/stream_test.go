package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/engine"
)

// viewer is a WebSocket client of a job's log stream.
type viewer struct {
	t    testing.TB
	conn *websocket.Conn
}

func (f *fixture) watch(jobID string) *viewer {
	f.t.Helper()
	return f.watchFrom(jobID, "")
}

// watchFrom opens the stream with a query (tail=N or after=N).
func (f *fixture) watchFrom(jobID, query string) *viewer {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(f.url, "http") + "/api/jobs/" + jobID + "/logs/stream?" + query
	conn, _, err := websocket.Dial(ctx, url, dialOptions(nil))
	if err != nil {
		f.t.Fatalf("dial log stream: %v", err)
	}
	conn.SetReadLimit(-1)
	f.t.Cleanup(func() { conn.CloseNow() })
	return &viewer{t: f.t, conn: conn}
}

// next reads one frame; it fails the test on a close or timeout.
func (v *viewer) next() string {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, data, err := v.conn.Read(ctx)
	if err != nil {
		v.t.Fatalf("read log stream: %v", err)
	}
	if typ != websocket.MessageText {
		v.t.Fatalf("frame type %v, want text", typ)
	}
	return string(data)
}

// closeStatus reads frames until the stream closes and returns its code
// with the text of the frames read on the way.
func (v *viewer) closeStatus() (websocket.StatusCode, string) {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var text strings.Builder
	for {
		_, data, err := v.conn.Read(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				v.t.Fatal("the log stream did not close")
			}
			return websocket.CloseStatus(err), text.String()
		}
		text.Write(data)
	}
}

func TestLogStreamSendsBackfillThenLiveChunksAndClosesWhenTheJobEnds(t *testing.T) {
	f := newFixture(t)
	w := f.register("w")
	id := f.execute("x")
	f.claimStep(w, id, "say")
	f.pushLogs(w, id, "say", "before connect")

	v := f.watch(id)
	if got := v.next(); !strings.Contains(got, `"line":"before connect"`) || strings.Count(got, "\n") != 1 {
		t.Fatalf("backfill = %q", got)
	}
	f.pushLogs(w, id, "say", "live one", "live two")
	got := v.next()
	if !strings.Contains(got, `"line":"live one"`) || !strings.Contains(got, `"line":"live two"`) || strings.Contains(got, "before connect") {
		t.Fatalf("live chunk = %q, want both pushed lines and nothing else", got)
	}
	second := f.watch(id)
	if got := second.next(); strings.Count(got, "\n") != 3 {
		t.Fatalf("a second viewer's backfill = %q, want all 3 lines", got)
	}

	f.worker("POST", "/worker/jobs/"+id+"/steps/say/complete", map[string]any{"worker_id": w, "output": nil, "exit_code": 0, "error": nil}).expect(200)
	f.runStep(w, id, "after", nil)
	for _, viewer := range []*viewer{v, second} {
		if code, _ := viewer.closeStatus(); code != websocket.StatusNormalClosure {
			t.Fatalf("close status = %v, want 1000", code)
		}
	}
}

func TestLogStreamOfAFinishedJobSendsTheLogAndCloses(t *testing.T) {
	f := newFixture(t)
	id := f.execute("x")
	w := f.register("w")
	f.claimStep(w, id, "say")
	f.pushLogs(w, id, "say", "the only line")
	f.api("POST", "/api/jobs/"+id+"/cancel", nil).expect(200)

	code, text := f.watch(id).closeStatus()
	if code != websocket.StatusNormalClosure || !strings.Contains(text, "the only line") {
		t.Fatalf("close %v after %q, want 1000 after the whole log", code, text)
	}
}

// endingLogs ends the job right after a viewer's log subscription is
// taken, with one more line pushed in between: the line is not in the
// backfill, and the job is over when the stream looks.
type endingLogs struct {
	api.LogStore
	end func()
}

func (l endingLogs) Subscribe(jobID string, q engine.LogQuery) (io.ReadCloser, <-chan []byte, func(), error) {
	backfill, updates, cancel, err := l.LogStore.Subscribe(jobID, q)
	if err == nil {
		l.end()
	}
	return backfill, updates, cancel, err
}

func TestLogStreamOfAJobEndingAsItOpensSendsTheLinesAfterTheBackfill(t *testing.T) {
	var end func()
	f := newFixture(t, func(c *fixtureConfig) {
		c.wrapLogs = func(l api.LogStore) api.LogStore { return endingLogs{LogStore: l, end: func() { end() }} }
	})
	id := f.execute("x")
	w := f.register("w")
	f.claimStep(w, id, "say")
	f.pushLogs(w, id, "say", "in the backfill")
	end = func() {
		f.pushLogs(w, id, "say", "after the backfill")
		f.api("POST", "/api/jobs/"+id+"/cancel", nil).expect(200)
	}

	code, text := f.watch(id).closeStatus()
	if code != websocket.StatusNormalClosure || !strings.Contains(text, "in the backfill") || !strings.Contains(text, "after the backfill") {
		t.Fatalf("close %v after %q, want 1000 after both lines", code, text)
	}
}

func TestLogStreamViewerThatHangsUpIsForgotten(t *testing.T) {
	f := newFixture(t)
	id := f.execute("x")
	w := f.register("w")
	f.claimStep(w, id, "say")
	v := f.watch(id)
	v.conn.Close(websocket.StatusGoingAway, "bye")
	// Pushing after the viewer left must neither fail nor block.
	for i := range 10 {
		f.pushLogs(w, id, "say", fmt.Sprint("line ", i))
	}
}

func TestSlowViewerDoesNotBlockLogPushes(t *testing.T) {
	f := newFixture(t)
	id := f.execute("x")
	w := f.register("w")
	f.claimStep(w, id, "say")

	slow := f.watch(id) // never reads until the end
	fast := f.watch(id)
	var fastBytes int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for {
			_, data, err := fast.conn.Read(ctx)
			if err != nil {
				return
			}
			fastBytes += len(data)
		}
	}()

	// Far more than the socket buffers and the store's per-viewer queue
	// hold: the slow viewer must be dropped instead of stalling the writer.
	line := strings.Repeat("x", 32<<10)
	const pushes = 600
	start := time.Now()
	for i := range pushes {
		f.pushLogs(w, id, "say", fmt.Sprint(i, line))
	}
	d := time.Since(start)
	t.Logf("%d pushes took %s", pushes, d)
	if d > 30*time.Second {
		t.Fatalf("%d pushes took %s", pushes, d)
	}

	code, _ := slow.closeStatus()
	if code != websocket.StatusTryAgainLater {
		t.Fatalf("slow viewer closed with %v, want 1013 (try again later)", code)
	}
	f.api("POST", "/api/jobs/"+id+"/cancel", nil).expect(200)
	wg.Wait()
	if fastBytes < pushes*len(line) {
		t.Fatalf("the fast viewer got %d bytes, want all %d", fastBytes, pushes*len(line))
	}
}

func TestLogStreamBackfillCanStartAtTheTailOrAfterALine(t *testing.T) {
	f := newFixture(t)
	w := f.register("w")
	id := f.execute("x")
	f.claimStep(w, id, "say")
	f.pushLogs(w, id, "say", "l1", "l2", "l3", "l4", "l5")

	tail := f.watchFrom(id, "tail=2")
	after := f.watchFrom(id, "after=3")
	for name, v := range map[string]*viewer{"tail=2": tail, "after=3": after} {
		if got := v.next(); strings.Count(got, "\n") != 2 || !strings.Contains(got, `"line":"l4"`) || !strings.Contains(got, `"line":"l5"`) {
			t.Fatalf("%s backfill = %q, want lines l4 and l5", name, got)
		}
	}
	f.pushLogs(w, id, "say", "live")
	for name, v := range map[string]*viewer{"tail=2": tail, "after=3": after} {
		if got := v.next(); !strings.Contains(got, `"line":"live"`) || strings.Count(got, "\n") != 1 {
			t.Fatalf("%s live frame = %q", name, got)
		}
	}
	for _, q := range []string{"tail=0", "after=-2", "tail=1&after=1", "tail=x"} {
		f.api("GET", "/api/jobs/"+id+"/logs/stream?"+q, nil).expect(400).errorMessage()
	}
}
