package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/appliance-sh/appliance/api/wire"
)

func TestBuildInputReadsValuesAsJSONWhenTheyParse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		inputJSON string
		fields    []string
		want      string // the input, JSON-encoded
		wantErr   string
	}{
		{name: "plain word is a string", fields: []string{"name=Ada"}, want: `{"name":"Ada"}`},
		{name: "number", fields: []string{"seconds=30"}, want: `{"seconds":30}`},
		{name: "long number keeps its digits", fields: []string{"id=12345678901234567890"}, want: `{"id":12345678901234567890}`},
		{name: "booleans", fields: []string{"a=true", "b=false"}, want: `{"a":true,"b":false}`},
		{name: "object", fields: []string{`o={"k": [1, 2]}`}, want: `{"o":{"k":[1,2]}}`},
		{name: "quoted JSON string stays a string", fields: []string{`v="42"`}, want: `{"v":"42"}`},
		{name: "version-like text is a string", fields: []string{"version=1.2.3"}, want: `{"version":"1.2.3"}`},
		{name: "empty value is an empty string", fields: []string{"note="}, want: `{"note":""}`},
		{name: "value may hold =", fields: []string{"expr=a=b"}, want: `{"expr":"a=b"}`},
		{name: "json then fields override", inputJSON: `{"a": 1, "b": 2}`, fields: []string{"b=3"}, want: `{"a":1,"b":3}`},
		{name: "no input at all", want: `{}`},
		{name: "missing =", fields: []string{"name"}, wantErr: `--input "name": want key=value`},
		{name: "empty key", fields: []string{"=x"}, wantErr: `want key=value`},
		{name: "input-json not an object", inputJSON: `[1]`, wantErr: "--input-json must be a JSON object"},
		{name: "input-json null", inputJSON: `null`, wantErr: "--input-json must be a JSON object"},
		{name: "input-json trailing data", inputJSON: `{} {}`, wantErr: "--input-json must be a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := buildInput(tc.inputJSON, tc.fields)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got)
			if string(b) != tc.want {
				t.Errorf("input = %s, want %s", b, tc.want)
			}
		})
	}
}

func TestParseInterleavedAcceptsFlagsAfterArguments(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantPos    []string
		wantFollow bool
		wantStep   string
	}{
		{args: []string{"ID", "--follow"}, wantPos: []string{"ID"}, wantFollow: true},
		{args: []string{"--follow", "ID"}, wantPos: []string{"ID"}, wantFollow: true},
		{args: []string{"ID", "--step", "s", "--follow"}, wantPos: []string{"ID"}, wantFollow: true, wantStep: "s"},
		{args: []string{"A", "--step=s", "B"}, wantPos: []string{"A", "B"}, wantStep: "s"},
		{args: []string{"--", "--follow"}, wantPos: []string{"--follow"}},
		{args: nil, wantPos: nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		follow := fs.Bool("follow", false, "")
		step := fs.String("step", "", "")
		pos, err := parseInterleaved(fs, tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !reflect.DeepEqual(pos, tc.wantPos) || *follow != tc.wantFollow || *step != tc.wantStep {
			t.Errorf("%q: positional %q, follow %v, step %q; want %q, %v, %q", tc.args, pos, *follow, *step, tc.wantPos, tc.wantFollow, tc.wantStep)
		}
	}
}

func TestClientUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"logs"}, "appliance logs: missing argument"},
		{[]string{"cancel", "a", "b"}, `appliance cancel: unexpected argument "b"`},
		{[]string{"run"}, "appliance run: missing argument"},
		{[]string{"run", "t", "--input", "novalue"}, `--input "novalue": want key=value`},
		{[]string{"run", "t", "--input-json", "[]"}, "--input-json must be a JSON object"},
		{[]string{"jobs", "--limit", "0"}, "--limit must be at least 1"},
		{[]string{"jobs", "extra"}, `appliance jobs: unexpected argument "extra"`},
		{[]string{"workers", "--server", "ftp://host"}, `--server "ftp://host" is not an http(s) URL`},
		{[]string{"tasks", "--bogus"}, "flag provided but not defined: -bogus"},
	} {
		code, out, errOut := runMain(tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "usage: appliance "+tc.args[0]) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, %q and the usage", tc.args, code, out, errOut, tc.want)
		}
	}
}

func TestLogPrinterFormatsLinesSplitAcrossChunks(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := ts.Local().Format("15:04:05")
	line := func(step, stream, text string) string {
		b, _ := json.Marshal(wireLogLine{TS: ts, Stream: stream, Step: step, Line: text})
		return string(b) + "\n"
	}
	log := line("build", "stdout", "compiling") + line("build", "stderr", "warning: x") + "plain text\n" + line("test-all", "stdout", "ok")

	for _, tc := range []struct {
		name string
		p    logPrinter
		want string
	}{
		{name: "all steps, aligned", want: clock + " build    | compiling\n" + clock + " build    ! warning: x\nplain text\n" + clock + " test-all | ok\n"},
		{name: "one step", p: logPrinter{step: "build"}, want: clock + " build | compiling\n" + clock + " build ! warning: x\n"},
		{name: "raw", p: logPrinter{raw: true, step: "test-all"}, want: line("test-all", "stdout", "ok")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			p := tc.p
			p.w = &out
			// Cut mid-line: nothing may print before its line is whole.
			cut := strings.Index(log, "compiling")
			p.write([]byte(log[:cut]))
			if out.Len() != 0 {
				t.Fatalf("printed half a line: %q", out.String())
			}
			p.write([]byte(log[cut:]))
			if out.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}

	var out strings.Builder
	p := logPrinter{w: &out}
	p.write([]byte(line("a", "stdout", "one") + strings.TrimSuffix(line("a", "stdout", "two"), "\n")))
	p.flush()
	if want := clock + " a | one\n" + clock + " a | two\n"; out.String() != want {
		t.Errorf("flush of an unterminated last line: got %q, want %q", out.String(), want)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                      "0s",
		350 * time.Millisecond:            "350ms",
		12400 * time.Millisecond:          "12.4s",
		3*time.Minute + 7*time.Second:     "3m07s",
		2*time.Hour + 5*time.Minute + 1e9: "2h05m",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestClientSendsTheTokenToTheServerNamedByTheEnvironment(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, `{"items": [], "total": 0}`)
	}))
	defer srv.Close()
	t.Setenv("APPLIANCE_SERVER", srv.URL)
	t.Setenv("APPLIANCE_TOKEN", "apk_0123")

	code, out, errOut := runMain("workers")
	if code != 0 || out != "no workers\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(auth, []string{"Bearer apk_0123"}) {
		t.Errorf("Authorization headers = %q", auth)
	}
}

func TestAnswerThatIsNotTheAPIsErrorShowsItsStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	defer srv.Close()
	code, _, errOut := runMain("jobs", "--server", srv.URL)
	if want := "appliance: server answered 502 Bad Gateway: upstream down\n"; code != 1 || errOut != want {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
}

// TestFollowReconnectsAfterFallingBehindWithoutRepeatingLines plays a
// server that drops the viewer (1013) after two lines; the reconnection
// resends the log from its start, and each line is printed once.
func TestFollowReconnectsAfterFallingBehindWithoutRepeatingLines(t *testing.T) {
	const id = "01234567-89ab-cdef-0123-456789abcdef"
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	line := func(text string) string {
		b, _ := json.Marshal(wireLogLine{TS: ts, Stream: "stdout", Step: "s", Line: text})
		return string(b) + "\n"
	}
	var mu sync.Mutex
	connections := 0
	status := "running"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, `{"job_id": %q, "status": %q, "steps": [{"step_name": "s", "status": %q}]}`, id, status, status)
	})
	mux.HandleFunc("GET /api/jobs/{id}/logs/stream", func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		mu.Lock()
		connections++
		n := connections
		mu.Unlock()
		ctx := r.Context()
		if n == 1 {
			_ = conn.Write(ctx, websocket.MessageText, []byte(line("one")+line("two")))
			_ = conn.Close(websocket.StatusTryAgainLater, "viewer too slow")
			return
		}
		_ = conn.Write(ctx, websocket.MessageText, []byte(line("one")+line("two")+line("thr")))
		_ = conn.Write(ctx, websocket.MessageText, []byte(line("four")))
		mu.Lock()
		status = "completed"
		mu.Unlock()
		_ = conn.Close(websocket.StatusNormalClosure, "job finished")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	code, out, errOut := runMain("logs", id, "--follow", "--server", srv.URL)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var texts []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		texts = append(texts, l[strings.LastIndex(l, " ")+1:])
	}
	if !reflect.DeepEqual(texts, []string{"one", "two", "thr", "four"}) {
		t.Errorf("lines printed: %q\n%s", texts, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if connections != 2 {
		t.Errorf("%d connections, want 2", connections)
	}
}

func TestFollowOfAnUnknownJobIsTheServersNotFound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error": "job \"x\": not found"}`)
	}))
	defer srv.Close()
	code, _, errOut := runMain("logs", "x", "--follow", "--server", srv.URL)
	if code != 1 || errOut != "appliance: job \"x\": not found\n" {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestJobsShowAQueuedJobsPlaceInLine(t *testing.T) {
	page := &wire.JobList{Total: 2, Items: []wire.Job{
		{JobID: "a", TaskName: "deploy", Status: "running", SourceType: "api"},
		{JobID: "b", TaskName: "deploy", Status: "pending", SourceType: "api", Queue: &wire.JobQueue{Name: "deploys", Position: 3}},
	}}
	var out strings.Builder
	printJobs(&out, page, 0, false, time.Now())
	if !strings.Contains(out.String(), "pending, queued (3rd)") || strings.Contains(out.String(), "running, queued") {
		t.Fatalf("jobs table:\n%s", out.String())
	}
	for n, want := range map[int]string{1: "1st", 2: "2nd", 11: "11th", 12: "12th", 13: "13th", 22: "22nd", 101: "101st", 111: "111th"} {
		if got := ordinal(n); got != want {
			t.Errorf("ordinal(%d) = %q, want %q", n, got, want)
		}
	}
}
