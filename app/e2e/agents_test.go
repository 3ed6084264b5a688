package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/runners/agent"
)

// testAPIKey is the providers' key in these tests: it must never show up
// in an answer, a log line or the server's own log.
const testAPIKey = "sk-test-7f3a9c1e5b2d4f6a8c0e"

// fakeLLM is a model provider on 127.0.0.1 speaking one wire format
// (OpenAI chat completions or Anthropic messages). answer decides each
// reply; every request is recorded, and a request whose context ended
// before the answer was written is counted in aborted.
type fakeLLM struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(w http.ResponseWriter, r *http.Request, n int)

	mu       sync.Mutex
	requests []fakeRequest
	aborted  chan struct{} // one send per request whose context ended
}

type fakeRequest struct {
	at     time.Time
	path   string
	header http.Header
	body   map[string]any
}

func newFakeLLM(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *fakeLLM {
	f := &fakeLLM{t: t, answer: answer, aborted: make(chan struct{}, 16)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.requests = append(f.requests, fakeRequest{at: time.Now(), path: r.URL.Path, header: r.Header.Clone(), body: body})
		n := len(f.requests)
		f.mu.Unlock()
		f.answer(w, r, n)
		if r.Context().Err() != nil {
			f.aborted <- struct{}{}
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeLLM) recorded() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.requests...)
}

// openAIReply answers a chat completion with content.
func openAIReply(w http.ResponseWriter, content string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-test-0613",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}},
		"usage": map[string]any{"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49},
	})
}

// anthropicReply answers a message with text.
func anthropicReply(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-1",
		"content":     []any{map[string]any{"type": "text", "text": text}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 30, "output_tokens": 11},
	})
}

// blockUntilAborted holds the request until its client goes away.
func blockUntilAborted(w http.ResponseWriter, r *http.Request, _ int) {
	select {
	case <-r.Context().Done():
	case <-time.After(30 * time.Second):
		openAIReply(w, "too late")
	}
}

// agentServer starts a real server (bbolt, HTTP API, in-process workers)
// whose provider `llm` is the fake, serving ws; its own log is captured.
func agentServer(t *testing.T, typ string, fake *fakeLLM, ws string) (*serverFixture, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	writeWorkspace(t, dir, ws)
	endpoint := fake.srv.URL + "/"
	if typ == agent.TypeOpenAI {
		endpoint = fake.srv.URL + "/v1/"
	}
	retries := 2
	cfg := testServerConfig(t, map[string]string{"ws": dir}, 1, func(c *config.Server) {
		c.Agents = agent.Config{Providers: map[string]agent.ProviderConfig{
			"llm": {Type: typ, APIKey: testAPIKey, APIEndpoint: endpoint, Model: "test-model", MaxRetries: &retries},
		}}
	})
	serverLog := &syncBuffer{}
	srv, err := startServer(context.Background(), cfg, slog.New(slog.NewTextHandler(serverLog, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	f := &serverFixture{t: t, srv: srv, url: "http://" + srv.Addr()}
	waitUntil(t, "the in-process workers to register", func() bool {
		var list struct {
			Total int `json:"total"`
		}
		do(t, "GET", f.url+"/api/workers", nil, &list)
		return list.Total > 0
	})
	return f, serverLog
}

// assertNoKey fails when the API key appears in the job's answers (detail,
// logs) or in the server's log.
func assertNoKey(t *testing.T, f *serverFixture, jobID string, serverLog *syncBuffer) {
	t.Helper()
	for _, path := range []string{"/api/jobs/" + jobID, "/api/jobs/" + jobID + "/logs", "/api/jobs?limit=50"} {
		resp, err := http.Get(f.url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), testAPIKey) {
			t.Errorf("GET %s shows the API key: %s", path, body)
		}
	}
	if strings.Contains(serverLog.String(), testAPIKey) {
		t.Errorf("the server log shows the API key")
	}
}

const classifyWorkspace = `
actions:
  classify:
    type: agent
    provider: llm
    temperature: 0.1
    system_prompt: You triage tickets for {{ input.team }}.
    input:
      ticket: {type: string, required: true}
      team: {type: string, default: Support}
    prompt: "Classify: {{ input.ticket }}"
    output:
      category: {type: string, options: [billing, bug], required: true, description: What it is about}
      urgent: {type: boolean, required: true}
      score: {type: integer}
tasks:
  triage:
    input:
      ticket: {type: string, required: true}
    flow:
      classify:
        action: classify
        input: {ticket: "{{ input.ticket }}"}
      page:
        depends_on: [classify]
        when: "{{ classify.output.urgent }}"
        type: script
        script: echo "paging about {{ classify.output.category }}"
`

// TestAgentStepStructuredOutputDrivesWhen runs an agent step against an
// OpenAI-compatible server: the schema goes into the system prompt and the
// native response_format, the reply (a fenced block) becomes the output
// with _meta, and a downstream `when` reads it.
func TestAgentStepStructuredOutputDrivesWhen(t *testing.T) {
	fake := newFakeLLM(t, func(w http.ResponseWriter, r *http.Request, n int) {
		urgent := "true"
		if n > 1 {
			urgent = "false"
		}
		openAIReply(w, "Here you go:\n```json\n{\"category\": \"bug\", \"urgent\": "+urgent+", \"score\": 3}\n```")
	})
	f, serverLog := agentServer(t, agent.TypeOpenAI, fake, classifyWorkspace)

	id := f.execute("ws", "triage", map[string]any{"ticket": "checkout is down"})
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	st := j.step("classify")
	if st.WorkerID != nil {
		t.Errorf("agent step worker_id = %v, want null", *st.WorkerID)
	}
	out := st.Output.(map[string]any)
	if out["category"] != "bug" || out["urgent"] != true || out["score"] != float64(3) {
		t.Errorf("output = %v", out)
	}
	meta, _ := out["_meta"].(map[string]any)
	tokens, _ := meta["tokens"].(map[string]any)
	if meta["provider"] != "llm" || meta["model"] != "gpt-test-0613" || tokens["input"] != float64(42) || tokens["output"] != float64(7) {
		t.Errorf("_meta = %v", meta)
	}
	if _, ok := meta["latency_ms"].(float64); !ok {
		t.Errorf("_meta.latency_ms missing: %v", meta)
	}
	if p := j.step("page"); p.Status != "completed" {
		t.Errorf("page step %s, want completed (urgent)", p.Status)
	}

	reqs := fake.recorded()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	req := reqs[0]
	if req.path != "/v1/chat/completions" || req.header.Get("Authorization") != "Bearer "+testAPIKey {
		t.Errorf("request %s with Authorization %q", req.path, req.header.Get("Authorization"))
	}
	if req.body["model"] != "test-model" || req.body["temperature"] != 0.1 {
		t.Errorf("model/temperature: %v %v", req.body["model"], req.body["temperature"])
	}
	msgs := req.body["messages"].([]any)
	system := msgs[0].(map[string]any)
	user := msgs[1].(map[string]any)
	if system["role"] != "system" || !strings.Contains(system["content"].(string), "You triage tickets for Support.") ||
		!strings.Contains(system["content"].(string), `"enum"`) || !strings.Contains(system["content"].(string), "What it is about") {
		t.Errorf("system message = %v", system)
	}
	if user["role"] != "user" || user["content"] != "Classify: checkout is down" {
		t.Errorf("user message = %v", user)
	}
	rf, _ := req.body["response_format"].(map[string]any)
	if rf["type"] != "json_schema" {
		t.Errorf("response_format = %v", req.body["response_format"])
	}

	logs := agentLogLines(t, f.logs(id, "classify"))
	for _, want := range []string{"prompt: Classify: checkout is down", "system: You triage tickets for Support.", `reply: {"category": "bug", "urgent": true, "score": 3}`} {
		if !slices.Contains(logs, want) {
			t.Errorf("step log lacks %q:\n%s", want, strings.Join(logs, "\n"))
		}
	}

	// Not urgent: the downstream step is skipped.
	id2 := f.execute("ws", "triage", map[string]any{"ticket": "invoice typo"})
	j2 := f.waitTerminal(id2)
	if j2.Status != "completed" || j2.step("page").Status != "skipped" {
		t.Errorf("second job %s, page %s; want completed, skipped", j2.Status, j2.step("page").Status)
	}
	assertNoKey(t, f, id, serverLog)
}

// agentLogLines are the texts of a JSONL log.
func agentLogLines(t *testing.T, jsonl string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		var line struct {
			Line string `json:"line"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, line.Line)
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAgentStepAnthropicTextAndStructured speaks the Anthropic Messages
// wire format: free text gives {text, _meta}; an output schema takes the
// reply's JSON.
func TestAgentStepAnthropicTextAndStructured(t *testing.T) {
	fake := newFakeLLM(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			anthropicReply(w, "Dear customer,\nthanks for writing.")
			return
		}
		anthropicReply(w, `{"category": "billing", "urgent": false}`)
	})
	f, serverLog := agentServer(t, agent.TypeAnthropic, fake, `
tasks:
  write:
    flow:
      draft:
        type: agent
        provider: llm
        model: claude-override
        max_tokens: 200
        prompt: Write a reply.
  triage:
    flow:
      classify:
        type: agent
        provider: llm
        prompt: Classify it.
        output:
          category: {type: string, options: [billing, bug], required: true}
          urgent: {type: boolean, required: true}
`)
	id := f.execute("ws", "write", nil)
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	out := j.step("draft").Output.(map[string]any)
	if out["text"] != "Dear customer,\nthanks for writing." {
		t.Errorf("text output = %v", out)
	}
	meta := out["_meta"].(map[string]any)
	if meta["provider"] != "llm" || meta["model"] != "claude-test-1" || meta["tokens"].(map[string]any)["input"] != float64(30) {
		t.Errorf("_meta = %v", meta)
	}
	req := fake.recorded()[0]
	// This SDK version sends the key as a bearer token.
	if req.path != "/v1/messages" || req.header.Get("Authorization") != "Bearer "+testAPIKey {
		t.Errorf("request %s with Authorization %q", req.path, req.header.Get("Authorization"))
	}
	if req.body["model"] != "claude-override" || req.body["max_tokens"] != float64(200) {
		t.Errorf("model/max_tokens = %v/%v", req.body["model"], req.body["max_tokens"])
	}
	if _, ok := req.body["system"]; ok {
		t.Errorf("system sent without a system prompt or schema: %v", req.body["system"])
	}
	if logs := agentLogLines(t, f.logs(id, "draft")); !slices.Contains(logs, "reply: Dear customer,") || !slices.Contains(logs, "reply: thanks for writing.") {
		t.Errorf("step log:\n%s", strings.Join(logs, "\n"))
	}

	id2 := f.execute("ws", "triage", nil)
	j2 := f.waitTerminal(id2)
	out2 := j2.step("classify").Output.(map[string]any)
	if j2.Status != "completed" || out2["category"] != "billing" || out2["urgent"] != false {
		t.Fatalf("job %s, output %v", j2.Status, out2)
	}
	sys := mustJSON(fake.recorded()[1].body["system"])
	if !strings.Contains(sys, "JSON Schema") || !strings.Contains(sys, "billing") {
		t.Errorf("system = %s", sys)
	}
	assertNoKey(t, f, id, serverLog)
}

// TestAgentStepSchemaViolationFailsNamingField fails the step when the
// reply does not fit the output schema, naming the field.
func TestAgentStepSchemaViolationFailsNamingField(t *testing.T) {
	fake := newFakeLLM(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			openAIReply(w, `{"category": "spam", "urgent": true}`)
			return
		}
		openAIReply(w, `{"category": "bug"}`)
	})
	f, _ := agentServer(t, agent.TypeOpenAI, fake, classifyWorkspace)
	for _, want := range []string{`field "category": value must be one of`, `field "urgent" is required but missing`} {
		id := f.execute("ws", "triage", map[string]any{"ticket": "x"})
		j := f.waitTerminal(id)
		st := j.step("classify")
		if j.Status != "failed" || st.Status != "failed" || st.ErrorMessage == nil || !strings.Contains(*st.ErrorMessage, want) {
			t.Errorf("job %s, step %s %v; want failed naming %q", j.Status, st.Status, deref(st.ErrorMessage), want)
		}
		if p := j.step("page"); p.Status != "skipped" {
			t.Errorf("page step %s, want skipped", p.Status)
		}
	}
}

// TestAgentStepRetriesAfter429 retries a 429 after its Retry-After.
func TestAgentStepRetriesAfter429(t *testing.T) {
	fake := newFakeLLM(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error": {"message": "slow down", "type": "rate_limit_error"}}`)
			return
		}
		openAIReply(w, "fine")
	})
	f, _ := agentServer(t, agent.TypeOpenAI, fake, `
tasks:
  ask:
    flow:
      ask: {type: agent, provider: llm, prompt: hi}
`)
	j := f.waitTerminal(f.execute("ws", "ask", nil))
	if j.Status != "completed" || j.step("ask").Output.(map[string]any)["text"] != "fine" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	reqs := fake.recorded()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < 900*time.Millisecond {
		t.Errorf("retried after %s, before Retry-After: 1", gap)
	}
}

// TestAgentStepErrorsNeverShowTheKey fails a step whose provider answers
// with an error quoting the key: the step's error, the logs and the
// server log show it redacted.
func TestAgentStepErrorsNeverShowTheKey(t *testing.T) {
	fake := newFakeLLM(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error": {"message": "Incorrect API key provided: `+testAPIKey+`", "type": "invalid_request_error"}}`)
	})
	f, serverLog := agentServer(t, agent.TypeOpenAI, fake, `
tasks:
  ask:
    flow:
      ask: {type: agent, provider: llm, prompt: hi}
`)
	id := f.execute("ws", "ask", nil)
	j := f.waitTerminal(id)
	st := j.step("ask")
	if j.Status != "failed" || st.ErrorMessage == nil || !strings.Contains(*st.ErrorMessage, "401 Unauthorized: Incorrect API key provided: [api_key]") {
		t.Fatalf("job %s, step error %v", j.Status, deref(st.ErrorMessage))
	}
	if n := len(fake.recorded()); n != 1 {
		t.Errorf("%d requests: a 401 is not retried", n)
	}
	assertNoKey(t, f, id, serverLog)
}

// TestAgentStepCancelAbortsTheCall cancels a job while its agent step
// waits for a slow reply: the provider sees its request end.
func TestAgentStepCancelAbortsTheCall(t *testing.T) {
	fake := newFakeLLM(t, blockUntilAborted)
	f, _ := agentServer(t, agent.TypeOpenAI, fake, `
tasks:
  ask:
    flow:
      ask: {type: agent, provider: llm, prompt: hi}
`)
	id := f.execute("ws", "ask", nil)
	waitUntil(t, "the provider to get the request", func() bool { return len(fake.recorded()) == 1 })
	if j := f.job(id); j.step("ask").Status != "running" {
		t.Fatalf("agent step %s, want running", j.step("ask").Status)
	}
	if code := do(t, "POST", f.url+"/api/jobs/"+id+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	select {
	case <-fake.aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's request was not cancelled")
	}
	j := f.waitTerminal(id)
	if j.Status != "cancelled" || j.step("ask").Status != "cancelled" {
		t.Errorf("job %s, step %s", j.Status, j.step("ask").Status)
	}
}

// TestAgentStepTimeoutAbortsTheCall fails an agent step at its timeout
// and ends its HTTP request.
func TestAgentStepTimeoutAbortsTheCall(t *testing.T) {
	fake := newFakeLLM(t, blockUntilAborted)
	f, _ := agentServer(t, agent.TypeAnthropic, fake, `
tasks:
  ask:
    flow:
      ask: {type: agent, provider: llm, prompt: hi, timeout: 1s}
`)
	start := time.Now()
	id := f.execute("ws", "ask", nil)
	select {
	case <-fake.aborted:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider's request was not cancelled at the timeout")
	}
	j := f.waitTerminal(id)
	st := j.step("ask")
	if j.Status != "failed" || st.ErrorMessage == nil || *st.ErrorMessage != "Step timed out after 1s" {
		t.Errorf("job %s, step error %v", j.Status, deref(st.ErrorMessage))
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the timeout took %s", took)
	}
}

// TestUnknownAgentProviderIsALoadError: with providers configured, a
// workspace naming another does not load, and says where and which exist.
func TestUnknownAgentProviderIsALoadError(t *testing.T) {
	fake := newFakeLLM(t, blockUntilAborted)
	f, _ := agentServer(t, agent.TypeOpenAI, fake, `
tasks:
  ask:
    flow:
      ask:
        type: agent
        provider: gpt
        prompt: hi
`)
	var list []struct {
		Name   string   `json:"name"`
		Errors []string `json:"errors"`
	}
	do(t, "GET", f.url+"/api/workspaces", nil, &list)
	want := `.workflows/main.yaml:7:19: tasks.ask.flow.ask.provider: unknown agent provider "gpt" (the server config's agents.providers defines: llm)`
	if len(list) != 1 || len(list[0].Errors) != 1 || list[0].Errors[0] != want {
		t.Errorf("workspaces = %+v\nwant the error %q", list, want)
	}
}

// TestExamplesServeWithoutAgentsConfigured: the default server loads the
// examples, agent action included, and the triage job fails clearly.
func TestExamplesServeWithoutAgentsConfigured(t *testing.T) {
	abs, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, ".workflows", "triage.yaml")); err != nil {
		t.Fatal(err)
	}
	f := startFixture(t, map[string]string{"examples": abs}, 1)
	j := f.waitTerminal(f.execute("examples", "triage-ticket", nil))
	st := j.step("classify")
	want := `agent: provider "llm" is not configured: no agent providers are configured (the server config has no agents.providers)`
	if j.Status != "failed" || st.ErrorMessage == nil || *st.ErrorMessage != want {
		t.Errorf("job %s, classify error %v; want %q", j.Status, deref(st.ErrorMessage), want)
	}
	if p := j.step("page-on-call"); p.Status != "skipped" {
		t.Errorf("page-on-call %s, want skipped", p.Status)
	}
}
