package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

const quickWorkspace = `tasks:
  quick:
    flow:
      say:
        type: script
        script: echo hello
`

// TestReadingA100MBLogKeepsTheServerSmall gives a finished job a 100 MB
// log (as the step_log limit allows), reads it whole over HTTP and over
// the live stream from the real binary, and checks the server's peak RSS
// stays far below the log's size: an answer built in memory would hold
// the log at least twice.
func TestReadingA100MBLogKeepsTheServerSmall(t *testing.T) {
	p := startBinaryServer(t, quickWorkspace, 1)
	url := "http://" + p.addr
	var out struct {
		JobID string `json:"job_id"`
	}
	if code := do(t, "POST", url+"/api/workspaces/ws/tasks/quick/execute", map[string]any{}, &out); code != 200 {
		t.Fatalf("execute: %d", code)
	}
	waitUntil(t, "the job to complete", func() bool {
		var j jobView
		do(t, "GET", url+"/api/jobs/"+out.JobID, nil, &j)
		return j.Status == "completed"
	})

	// Grow the job's log file to 100 MB of step lines with characters to
	// escape, as a long step would have left it.
	logFile := filepath.Join(p.args[1], "logs", out.JobID+".jsonl")
	f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	text := strings.Repeat(`out "quoted" \ é `, 58) // ~1000 bytes
	type wireLine struct {                          // the store's layout
		TS     string `json:"ts"`
		Stream string `json:"stream"`
		Step   string `json:"step"`
		Line   string `json:"line"`
	}
	added := 0
	for ; ; added++ {
		info, _ := f.Stat()
		if info.Size()+int64(bw.Buffered()) >= 100<<20 {
			break
		}
		line, _ := json.Marshal(wireLine{"2025-03-01T12:00:00Z", "stdout", "say", fmt.Sprint(text, added)})
		bw.Write(append(line, '\n'))
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	resp, err := http.Get(url + "/api/jobs/" + out.JobID + "/logs")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(began)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET logs: %d %v", resp.StatusCode, err)
	}
	var got struct {
		Logs  string `json:"logs"`
		Lines int    `json:"lines"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("GET logs answered %d bytes that do not decode: %v", len(body), err)
	}
	if got.Logs != string(want) || got.Lines != strings.Count(string(want), "\n") {
		t.Fatalf("GET logs = %d bytes, %d lines; want the file's %d bytes", len(got.Logs), got.Lines, len(want))
	}
	lastLine := want[strings.LastIndex(string(want[:len(want)-1]), "\n")+1:]
	if !strings.HasSuffix(got.Logs, string(lastLine)) {
		t.Fatalf("log ends %q, want %q", got.Logs[len(got.Logs)-100:], lastLine)
	}
	var tail struct {
		Logs string `json:"logs"`
		Next int    `json:"next"`
	}
	if code := do(t, "GET", url+"/api/jobs/"+out.JobID+"/steps/say/logs?tail=1", nil, &tail); code != 200 || tail.Logs != string(lastLine) || tail.Next != added+1 {
		t.Fatalf("tail=1 of step say = %d, %q, next %d", code, tail.Logs, tail.Next)
	}

	pid := p.cmd.Process.Pid
	peak := peakRSS(t, pid)
	t.Logf("read a %d MB log (a %d MB answer) in %v (%.0f MB/s); server peak RSS %d MB", len(want)>>20, len(body)>>20,
		took.Round(time.Millisecond), float64(len(body))/(1<<20)/took.Seconds(), peak>>20)
	if peak > 200<<20 {
		t.Errorf("server peak RSS %d MB reading a %d MB log, want under 200 MB", peak>>20, len(want)>>20)
	}

	// The live stream's backfill is the whole log too, sent as it is read.
	// Writing 5 to clear_refs starts the peak over.
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset the server's peak RSS: %v", err)
	}
	began = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+p.addr+"/api/jobs/"+out.JobID+"/logs/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1)
	var streamed, frames int
	for {
		_, data, err := conn.Read(ctx)
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
			break
		}
		if err != nil {
			t.Fatalf("log stream after %d bytes: %v", streamed, err)
		}
		if !bytes.Equal(data, want[streamed:streamed+len(data)]) {
			t.Fatalf("stream frame %d at byte %d differs from the log file", frames, streamed)
		}
		streamed += len(data)
		frames++
	}
	if streamed != len(want) {
		t.Fatalf("stream sent %d bytes, want the log's %d", streamed, len(want))
	}

	peak = peakRSS(t, pid)
	t.Logf("streamed the %d MB log in %d frames in %v; server peak RSS since the GET %d MB", streamed>>20, frames,
		time.Since(began).Round(time.Millisecond), peak>>20)
	if peak > 80<<20 {
		t.Errorf("server peak RSS %d MB streaming a %d MB log, want under 80 MB", peak>>20, len(want)>>20)
	}
}

// peakRSS is the peak resident set size of a process, from /proc.
func peakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	status, err := readProc(pid, "status")
	if err != nil {
		t.Fatal(err)
	}
	return procField(t, status, "VmHWM")
}

// procField reads a "Name:  N kB" field of /proc/PID/status, in bytes.
func procField(t testing.TB, status, name string) int64 {
	t.Helper()
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", name, l)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc status", name)
	return 0
}
