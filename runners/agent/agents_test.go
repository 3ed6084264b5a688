package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// loopback is a provider API on 127.0.0.1: answer writes the n-th reply.
type loopback struct {
	srv    *httptest.Server
	mu     sync.Mutex
	seen   []*http.Request
	bodies []map[string]any
}

func newLoopback(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *loopback {
	l := &loopback{}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		l.mu.Lock()
		l.seen = append(l.seen, r)
		l.bodies = append(l.bodies, body)
		n := len(l.seen)
		l.mu.Unlock()
		answer(w, r, n)
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *loopback) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

func chatReply(w http.ResponseWriter, content string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "c", "object": "chat.completion", "created": 1, "model": "served-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}},
		"usage":   map[string]any{"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
	})
}

// redirect sends every request to the loopback server, whatever its host:
// the vendors' default URLs are exercised without leaving the machine.
type redirect struct{ to *url.URL }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Host = req.URL.Host // what the client asked for, seen by the server
	req.URL.Scheme, req.URL.Host = r.to.Scheme, r.to.Host
	return http.DefaultTransport.RoundTrip(req)
}

func intp(n int) *int { return &n }

func TestUnknownProviderNamesTheKnownOnes(t *testing.T) {
	r, err := New(Config{Providers: map[string]ProviderConfig{
		"b": {Type: TypeOpenAI, Model: "m", APIKey: "k"},
		"a": {Type: TypeAnthropic, Model: "m", APIKey: "k"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Call(context.Background(), engine.AgentRequest{Provider: "c", Prompt: "hi"})
	if err == nil || err.Error() != `provider "c" is not configured (the server config's agents.providers defines: a, b)` {
		t.Fatalf("err = %v", err)
	}
	empty, _ := New(Config{}, nil)
	if _, err := empty.Call(context.Background(), engine.AgentRequest{Provider: "c"}); err == nil || !strings.Contains(err.Error(), "no agents.providers") {
		t.Fatalf("err = %v", err)
	}
}

func TestOpenAIDefaultURLUsesMaxCompletionTokens(t *testing.T) {
	l := newLoopback(t, func(w http.ResponseWriter, r *http.Request, n int) { chatReply(w, "ok") })
	to, _ := url.Parse(l.srv.URL)
	r, err := New(Config{Providers: map[string]ProviderConfig{
		"o": {Type: TypeOpenAI, Model: "gpt-x", APIKey: "sk-1", MaxTokens: intp(99)},
	}}, &http.Client{Transport: redirect{to}})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := r.Call(context.Background(), engine.AgentRequest{Provider: "o", Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "ok" || reply.Model != "served-model" || reply.InputTokens != 3 || reply.OutputTokens != 4 {
		t.Errorf("reply = %+v", reply)
	}
	req, body := l.seen[0], l.bodies[0]
	if req.URL.Path != "/v1/chat/completions" || req.Host != "api.openai.com" {
		t.Errorf("request to %s%s", req.Host, req.URL.Path)
	}
	if body["max_completion_tokens"] != float64(99) || body["max_tokens"] != nil || body["response_format"] != nil {
		t.Errorf("body = %v", body)
	}
}

func TestClientsReadNoVendorEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1/")
	l := newLoopback(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if strings.HasSuffix(r.URL.Path, "/messages") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
			return
		}
		chatReply(w, "ok")
	})
	r, err := New(Config{Providers: map[string]ProviderConfig{
		"o": {Type: TypeOpenAI, Model: "m", APIEndpoint: l.srv.URL + "/v1/"},
		"a": {Type: TypeAnthropic, Model: "m", APIEndpoint: l.srv.URL + "/"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"o", "a"} {
		if _, err := r.Call(context.Background(), engine.AgentRequest{Provider: p, Prompt: "hi"}); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	for _, req := range l.seen {
		for name, v := range req.Header {
			if strings.Contains(strings.Join(v, " "), "from-env") {
				t.Errorf("%s sent %s: %v", req.URL.Path, name, v)
			}
		}
	}
}

func TestTransientErrorsAreRetried(t *testing.T) {
	l := newLoopback(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			// A connection reset: the server drops the connection unanswered.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		default:
			chatReply(w, "third time lucky")
		}
	})
	r, _ := New(Config{Providers: map[string]ProviderConfig{
		"o": {Type: TypeOpenAI, Model: "m", APIEndpoint: l.srv.URL + "/v1/", MaxRetries: intp(2)},
	}}, nil)
	start := time.Now()
	reply, err := r.Call(context.Background(), engine.AgentRequest{Provider: "o", Prompt: "hi"})
	if err != nil || reply.Text != "third time lucky" || l.count() != 3 {
		t.Fatalf("reply %+v, err %v after %d requests", reply, err, l.count())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("retries took %s", took)
	}
}

func TestRetriesStopAtMaxRetries(t *testing.T) {
	l := newLoopback(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error": {"message": "boom", "type": "server_error"}}`)
	})
	r, _ := New(Config{Providers: map[string]ProviderConfig{
		"o": {Type: TypeOpenAI, Model: "m", APIEndpoint: l.srv.URL + "/v1/", MaxRetries: intp(0)},
	}}, nil)
	_, err := r.Call(context.Background(), engine.AgentRequest{Provider: "o", Prompt: "hi"})
	if err == nil || err.Error() != `provider "o" (openai, model m): 500 Internal Server Error: boom` || l.count() != 1 {
		t.Fatalf("err %v after %d requests", err, l.count())
	}
}

// The start-up banner names each provider's endpoint without the password
// a proxy URL may carry.
func TestDescribeHidesTheEndpointsPassword(t *testing.T) {
	cfg := Config{Providers: map[string]ProviderConfig{
		"proxy": {Type: TypeOpenAI, Model: "m", APIEndpoint: "https://team:s3cret-pass@llm.internal/v1", APIKey: "k-123"},
		"plain": {Type: TypeAnthropic, Model: "c", APIEndpoint: "http://127.0.0.1:9/"},
	}}
	got := cfg.Describe()
	for _, secret := range []string{"s3cret-pass", "k-123"} {
		if strings.Contains(got, secret) {
			t.Errorf("the banner shows %q: %s", secret, got)
		}
	}
	for _, want := range []string{"proxy (openai, m at https://team:xxxxx@llm.internal/v1)", "plain (anthropic, c at http://127.0.0.1:9/)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the banner lacks %q: %s", want, got)
		}
	}
}
