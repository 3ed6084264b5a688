// Package logtest is the contract of a job log backend (store.LogBackend):
// the suite every backend runs, the JSONL files and PostgreSQL alike, so
// the API, the engine, the archive and retention see one behaviour.
package logtest

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

// Storage is one place logs are kept under test: a directory, a database.
type Storage interface {
	// Open returns a new backend over the storage, which the suite closes:
	// after the last one's Close it is a restarted server; with another
	// still open, a second replica.
	Open(t *testing.T) store.LogBackend
	// SetWritten makes the job's log look last written at `at`.
	SetWritten(t *testing.T, jobID string, at time.Time)
}

// Config runs the suite over one kind of backend.
type Config struct {
	// New returns a new, empty storage.
	New func(t *testing.T) Storage
	// KeepsDroppedCounts says the backend saves a capped step run's
	// dropped lines with its counts, so the run's warning after a restart
	// counts those dropped before it too (the files recount only the lines
	// they kept, and count what is dropped from the restart on).
	KeepsDroppedCounts bool
	// FollowsOtherWriters says a subscriber on one backend receives the
	// lines another backend over the same storage appends (another
	// replica), and sees the stream end when that one finishes the job.
	FollowsOtherWriters bool
}

// Run runs the whole suite.
func Run(t *testing.T, cfg Config) {
	for _, tc := range []struct {
		name string
		f    func(t *testing.T, cfg Config)
	}{
		{"AppendWritesOneJSONObjectPerLineAndReadFiltersBySteps", testAppendAndStepFilter},
		{"ReadOfAJobWithoutLogIsEmpty", testReadWithoutLog},
		{"ConcurrentAppendsToOneJobKeepLinesIntact", testConcurrentAppends},
		{"LinesAfterFinishAreWritten", testLinesAfterFinish},
		{"UnsafeJobIDsAreRejected", testUnsafeIDs},
		{"ReadLogTailAndAfterMatchTheWholeLog", testTailAndAfter},
		{"ReadLogStopsWhenItsContextEnds", testReadStops},
		{"ReadersDuringAppendsSeeWholeLinesInOrder", testReadersDuringAppends},
		{"SubscribeMidStreamSeesEveryLineExactlyOnce", testSubscribeMidStream},
		{"SlowSubscriberIsDroppedWithoutBlockingAppendOrOthers", testSlowSubscriber},
		{"FinishClosesSubscriptionsAfterDeliveringEveryChunk", testFinishCloses},
		{"CancelStopsUpdates", testCancel},
		{"CloseEndsEverySubscription", testClose},
		{"StepRunOverItsLogLimitKeepsItsFirstLinesAndWarnsOnceAtItsEnd", testStepCap},
		{"StepLogLimitHoldsAcrossARestart", testStepCapRestart},
		{"StepLogLimitCountsPrintedBytes", testStepCapPrintedBytes},
		{"LongLinesAreCutWithAMarker", testLongLines},
		{"RepeatedPushAfterARestartAppendsOnlyTheLinesTheLogLacks", testRepeatedPushAfterRestart},
		{"RepeatedPushAfterItsRunEndedAppendsOnlyTheLinesTheLogLacks", testRepeatedPushAfterTheRunEnded},
		{"RemoveDeletesOnlyThatJobsLog", testRemove},
		{"LastWrittenBeforeListsOldLogsAndNotesKeepTheirTime", testLastWritten},
		{"ASecondBackendReadsTheLogTheFirstWrote", testSecondReader},
		{"ASecondBackendStreamsTheLogTheFirstWrites", testSecondStreamer},
		{"ArchivedLogIsReadBackOnceTheBackendRemovedIt", testArchive},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, cfg) })
	}
}

// t0 is the lines' time unless a test says otherwise.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func line(step, text string) engine.LogLine {
	return engine.LogLine{TS: t0, Stream: "stdout", Step: step, Line: text}
}

func appendLines(t *testing.T, l store.LogBackend, jobID string, lines ...engine.LogLine) {
	t.Helper()
	if err := l.Append(jobID, lines); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

// open returns a backend over a new storage.
func open(t *testing.T, cfg Config) (store.LogBackend, Storage) {
	t.Helper()
	s := cfg.New(t)
	return s.Open(t), s
}

// read returns the selected lines of the job's log as one string.
func read(t *testing.T, l interface {
	ReadLog(context.Context, string, engine.LogQuery, io.Writer) (engine.LogPage, error)
}, jobID, step string) string {
	t.Helper()
	var b strings.Builder
	if _, err := l.ReadLog(context.Background(), jobID, engine.LogQuery{Step: step}, &b); err != nil {
		t.Fatalf("ReadLog(%s, %q): %v", jobID, step, err)
	}
	return b.String()
}

// wireLine is a stored line, as the files hold it.
type wireLine struct {
	TS     string `json:"ts"`
	Stream string `json:"stream"`
	Step   string `json:"step"`
	Line   string `json:"line"`
}

// decode decodes a log; bytesOf is what each step printed (its lines'
// bytes and newlines), the unit of the step_log limit.
func decode(t *testing.T, data string) (lines []wireLine, bytesOf map[string]int) {
	t.Helper()
	bytesOf = map[string]int{}
	for _, raw := range strings.SplitAfter(data, "\n") {
		if raw == "" {
			continue
		}
		if !strings.HasSuffix(raw, "\n") {
			t.Fatalf("line without its newline: %.80q", raw)
		}
		var w wireLine
		if err := json.Unmarshal([]byte(raw), &w); err != nil {
			t.Fatalf("line %.80q: %v", raw, err)
		}
		lines = append(lines, w)
		bytesOf[w.Step] += len(w.Line) + 1
	}
	return lines, bytesOf
}

func lineTexts(t *testing.T, data []byte) []string {
	t.Helper()
	lines, _ := decode(t, string(data))
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Line
	}
	return out
}

// readBackfill reads a subscription's backfill to its end and closes it.
func readBackfill(t *testing.T, r io.ReadCloser) []byte {
	t.Helper()
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read backfill: %v", err)
	}
	return data
}

// receive reads one chunk, failing the test instead of hanging; a timeout
// reports the channel as closed so callers in other goroutines stop too.
func receive(t *testing.T, ch <-chan []byte) ([]byte, bool) {
	t.Helper()
	select {
	case c, ok := <-ch:
		return c, ok
	case <-time.After(10 * time.Second):
		t.Error("no chunk and no close within 10s")
		return nil, false
	}
}

// drain collects chunks until the channel is closed.
func drain(t *testing.T, ch <-chan []byte) []byte {
	t.Helper()
	var all []byte
	for {
		c, ok := receive(t, ch)
		if !ok {
			return all
		}
		all = append(all, c...)
	}
}

// subscriberBuffer sets the backend's subscriber buffer, which every
// backend sharing store.LogHub lets a test set.
func subscriberBuffer(t *testing.T, l store.LogBackend, n int) {
	t.Helper()
	b, ok := l.(interface{ SetSubscriberBuffer(int) })
	if !ok {
		t.Fatalf("%T cannot set its subscriber buffer", l)
	}
	b.SetSubscriberBuffer(n)
}
