package engine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// fakeAgents is an AgentCaller a test answers by hand: each call is
// announced on calls and waits for a reply on replies or for its context
// to end, which it reports on aborted.
type fakeAgents struct {
	calls   chan engine.AgentRequest
	replies chan engine.AgentReply
	aborted chan error
}

func newFakeAgents() *fakeAgents {
	return &fakeAgents{
		calls:   make(chan engine.AgentRequest, 8),
		replies: make(chan engine.AgentReply, 8),
		aborted: make(chan error, 8),
	}
}

func (a *fakeAgents) Call(ctx context.Context, req engine.AgentRequest) (engine.AgentReply, error) {
	a.calls <- req
	select {
	case r := <-a.replies:
		return r, nil
	case <-ctx.Done():
		a.aborted <- ctx.Err()
		return engine.AgentReply{}, ctx.Err()
	}
}

func (a *fakeAgents) nextCall(t *testing.T) engine.AgentRequest {
	t.Helper()
	select {
	case r := <-a.calls:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was never called")
		return engine.AgentRequest{}
	}
}

func (a *fakeAgents) waitAborted(t *testing.T) {
	t.Helper()
	select {
	case err := <-a.aborted:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("call ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent call was not aborted")
	}
}

const agentFlow = `
tasks:
  t:
    input:
      ticket: {type: string, default: the printer is on fire}
    flow:
      ask:
        type: agent
        provider: llm
        model: m1
        system_prompt: "You are {{ input.role }}."
        prompt: "Ticket: {{ input.ticket }}"
        input:
          role: a triager
          ticket: "{{ input.ticket }}"
        output:
          urgent: {type: boolean, required: true}
      after:
        depends_on: [ask]
        when: "{{ ask.output.urgent }}"
        type: script
        script: "true"
  slow:
    flow:
      ask: {type: agent, provider: llm, prompt: hi, timeout: 30s}
  plain:
    flow:
      ask: {type: agent, provider: llm, prompt: hi}
  script:
    flow:
      run: {type: script, script: "true"}
  fan:
    flow:
      ask: {type: agent, provider: llm, prompt: "{{ each.item }}", for_each: [a, b]}
`

func agentFixture(t *testing.T) (*enginetest.Fixture, *fakeAgents) {
	a := newFakeAgents()
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, agentFlow), enginetest.Options{Agents: a})
	return f, a
}

func TestAgentStepRendersPromptsAndCompletesWithTheReply(t *testing.T) {
	f, a := agentFixture(t)
	job := f.Execute("t", nil)
	req := a.nextCall(t)
	if req.Provider != "llm" || req.Model != "m1" || req.Prompt != "Ticket: the printer is on fire" ||
		!strings.HasPrefix(req.System, "You are a triager.\n\nReply with one JSON object") {
		t.Errorf("request = %+v", req)
	}
	want := map[string]any{"type": "object", "properties": map[string]any{"urgent": map[string]any{"type": "boolean"}}, "required": []string{"urgent"}}
	if !reflect.DeepEqual(req.Schema, want) {
		t.Errorf("schema = %#v", req.Schema)
	}
	st := f.WaitStep(job, "ask", engine.StepRunning)
	if st.WorkerID != nil || st.Deadline == nil || !st.Deadline.Equal(enginetest.Epoch.Add(engine.DefaultAgentTimeout)) {
		t.Errorf("running agent step: worker %v, deadline %v", st.WorkerID, st.Deadline)
	}
	a.replies <- engine.AgentReply{Text: `{"urgent": true}`, Model: "m1-2025", InputTokens: 5, OutputTokens: 2}
	f.WaitStep(job, "after", engine.StepReady)
	out := f.Step(job, "ask").Output.(map[string]any)
	meta := out["_meta"].(map[string]any)
	if out["urgent"] != true || meta["provider"] != "llm" || meta["model"] != "m1-2025" ||
		!reflect.DeepEqual(meta["tokens"], map[string]any{"input": float64(5), "output": float64(2)}) {
		t.Errorf("output = %v", out)
	}
	var lines []string
	for _, l := range f.Logs.Lines(job) {
		if l.Step == "ask" {
			lines = append(lines, l.Line)
		}
	}
	wantLines := []string{
		"system: You are a triager.",
		`output schema: {"properties":{"urgent":{"type":"boolean"}},"required":["urgent"],"type":"object"}`,
		"prompt: Ticket: the printer is on fire",
		`reply: {"urgent": true}`,
	}
	if !reflect.DeepEqual(lines, wantLines) {
		t.Errorf("step log lines:\n%q\nwant\n%q", lines, wantLines)
	}
}

func TestAgentStepTimeoutAbortsTheCall(t *testing.T) {
	for _, c := range []struct {
		task, want string
		after      time.Duration
	}{
		{"slow", "Step timed out after 30s", 30 * time.Second},
		{"plain", "Step timed out after 300s", engine.DefaultAgentTimeout},
	} {
		t.Run(c.task, func(t *testing.T) {
			f, a := agentFixture(t)
			job := f.Execute(c.task, nil)
			a.nextCall(t)
			f.WaitTimers(1)
			f.Clock.Advance(c.after)
			a.waitAborted(t)
			f.WaitStatus(job, engine.JobFailed)
			if st := f.Step(job, "ask"); st.ErrorMessage == nil || *st.ErrorMessage != c.want {
				t.Errorf("error = %v, want %q", st.ErrorMessage, c.want)
			}
		})
	}
}

// TestAgentStepTimeoutStartsWithItsSlot: with every agent slot taken a
// step waits, its timeout not running, and a slot goes to the first
// waiting step still running (a cancelled one gave its place up).
func TestAgentStepTimeoutStartsWithItsSlot(t *testing.T) {
	a := newFakeAgents()
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, agentFlow), enginetest.Options{Agents: a, AgentSlots: 1})
	first := f.Execute("slow", nil)
	a.nextCall(t)
	gaveUp := f.Execute("slow", nil)
	f.WaitStep(gaveUp, "ask", engine.StepRunning)
	waiting := f.Execute("slow", nil)
	for _, job := range []string{gaveUp, waiting} {
		if st := f.WaitStep(job, "ask", engine.StepRunning); st.Deadline != nil {
			t.Errorf("waiting agent step has a deadline (%v)", st.Deadline)
		}
		f.Eventually(func() bool {
			return slices.Contains(f.Logs.ServerLines(job), `step "ask" waits for an agent slot (1 calls in flight)`)
		},
			func() string { return fmt.Sprintf("server log of %s: %q", job, f.Logs.ServerLines(job)) })
	}
	if err := f.Engine.CancelJob(context.Background(), gaveUp); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(gaveUp, engine.JobCancelled)

	f.Clock.Advance(20 * time.Second)
	a.replies <- engine.AgentReply{Text: "done"}
	f.WaitStatus(first, engine.JobCompleted)
	a.nextCall(t)
	slot := enginetest.Epoch.Add(20 * time.Second)
	if st := f.WaitStep(waiting, "ask", engine.StepRunning); st.Deadline == nil || !st.Deadline.Equal(slot.Add(30*time.Second)) {
		t.Fatalf("deadline once it has a slot = %v, want %v", st.Deadline, slot.Add(30*time.Second))
	}
	f.Clock.Advance(30 * time.Second)
	a.waitAborted(t)
	f.WaitStatus(waiting, engine.JobFailed)
	st := f.Step(waiting, "ask")
	if st.ErrorMessage == nil || *st.ErrorMessage != "Step timed out after 30s" || st.CompletedAt == nil || !st.CompletedAt.Equal(slot.Add(30*time.Second)) {
		t.Errorf("step ended %v with %v, want the timeout 30s after it got its slot", st.CompletedAt, st.ErrorMessage)
	}
}

func TestCancelAbortsTheAgentCall(t *testing.T) {
	f, a := agentFixture(t)
	job := f.Execute("plain", nil)
	a.nextCall(t)
	if err := f.Engine.CancelJob(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	a.waitAborted(t)
	f.WaitStatus(job, engine.JobCancelled)
}

func TestTheLoopRunsWhileAgentCallsWait(t *testing.T) {
	f, a := agentFixture(t)
	slow := f.Execute("plain", nil)
	a.nextCall(t)
	other := f.Execute("script", nil)
	f.RunJobStep(other, "run", enginetest.Ok(nil))
	f.WaitStatus(other, engine.JobCompleted)
	if st := f.Step(slow, "ask"); st.Status != engine.StepRunning {
		t.Errorf("agent step %s, want running", st.Status)
	}
	a.replies <- engine.AgentReply{Text: "done"}
	f.WaitStatus(slow, engine.JobCompleted)
}

func TestAgentCallInFlightAtRestartFails(t *testing.T) {
	f, a := agentFixture(t)
	job := f.Execute("plain", nil)
	a.nextCall(t)
	fan := f.Execute("fan", nil)
	a.nextCall(t)
	a.nextCall(t)
	f.Restart()
	for range 3 {
		a.waitAborted(t)
	}
	f.WaitStatus(job, engine.JobFailed)
	if st := f.Step(job, "ask"); st.ErrorMessage == nil || *st.ErrorMessage != "agent: the server stopped during the call" {
		t.Errorf("error = %v", st.ErrorMessage)
	}
	f.WaitStatus(fan, engine.JobFailed)
	for _, name := range []string{"ask[0]", "ask[1]"} {
		if st := f.Step(fan, name); st.ErrorMessage == nil || *st.ErrorMessage != "agent: the server stopped during the call" {
			t.Errorf("%s error = %v", name, st.ErrorMessage)
		}
	}
	// The parent ends from its instances, not as a lost call of its own.
	if st := f.Step(fan, "ask"); st.Status != engine.StepFailed || st.ErrorMessage == nil || *st.ErrorMessage != "2 of 2 for_each instances failed" {
		t.Errorf("for_each parent %s: %v", st.Status, st.ErrorMessage)
	}
	for _, l := range f.Logs.ServerLines(fan) {
		if strings.HasPrefix(l, `step "ask" failed: agent:`) {
			t.Errorf("the for_each parent failed as a lost call: %q", l)
		}
	}
}

func TestAgentStepWithoutCallerFails(t *testing.T) {
	f := enginetest.New(t, agentFlow)
	job := f.Execute("plain", nil)
	f.WaitStatus(job, engine.JobFailed)
	want := `agent: provider "llm" is not configured: ` + engine.ErrNoAgents.Error()
	if st := f.Step(job, "ask"); st.ErrorMessage == nil || *st.ErrorMessage != want {
		t.Errorf("error = %v, want %q", st.ErrorMessage, want)
	}
}

func TestParseAgentReply(t *testing.T) {
	output := map[string]*workflow.OutputField{
		"category": {Type: "string", Options: []any{"bug", "billing"}, Required: true},
		"score":    {Type: "integer"},
		"tags":     {Type: "array"},
		"lang":     {Type: "string", Default: "en"},
	}
	schema := engine.OutputSchema(output)
	cases := []struct {
		name, reply string
		want        map[string]any
		err         string
	}{
		{"bare", `{"category": "bug", "score": 2}`, map[string]any{"category": "bug", "score": float64(2), "lang": "en"}, ""},
		{"fenced", "Sure.\n```json\n{\"category\": \"billing\", \"tags\": [\"a\"]}\n```\nBye.", map[string]any{"category": "billing", "tags": []any{"a"}, "lang": "en"}, ""},
		{"fence without language", "```\n{\"category\": \"bug\", \"lang\": \"de\"}\n```", map[string]any{"category": "bug", "lang": "de"}, ""},
		{"prose around", `I think {"category": "bug"} fits.`, map[string]any{"category": "bug", "lang": "en"}, ""},
		{"not in enum", `{"category": "spam"}`, nil, `field "category": value must be one of`},
		{"missing", `{"score": 1}`, nil, `field "category" is required but missing`},
		{"wrong type", `{"category": "bug", "score": 1.5}`, nil, `field "score": got number, want integer`},
		{"no json", `I cannot help with that.`, nil, `the reply holds no JSON object: "I cannot help with that."`},
		{"array", `[1, 2]`, nil, `the reply holds no JSON object`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := engine.ParseAgentReply(c.reply, schema, output)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

func TestAgentStepsFanOutAndMaskSecretsInTheirLog(t *testing.T) {
	a := newFakeAgents()
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, `
secrets:
  TOKEN: tok-5f2e9a71
tasks:
  t:
    flow:
      ask:
        type: agent
        provider: llm
        for_each: [red, blue]
        prompt: "Name a {{ each.item }} fruit; token {{ secret.TOKEN }}"
`), enginetest.Options{Agents: a})
	job := f.Execute("t", nil)
	prompts := map[string]bool{}
	for range 2 {
		prompts[a.nextCall(t).Prompt] = true
		a.replies <- engine.AgentReply{Text: "a fruit"}
	}
	f.WaitStatus(job, engine.JobCompleted)
	if !prompts["Name a red fruit; token tok-5f2e9a71"] || !prompts["Name a blue fruit; token tok-5f2e9a71"] {
		t.Errorf("prompts = %v", prompts)
	}
	out, _ := f.Step(job, "ask").Output.([]any)
	if len(out) != 2 || out[0].(map[string]any)["text"] != "a fruit" {
		t.Errorf("aggregated output = %#v", f.Step(job, "ask").Output)
	}
	var prompt []string
	for _, l := range f.Logs.Lines(job) {
		if strings.Contains(l.Line, "tok-5f2e9a71") {
			t.Errorf("log line shows the secret: %q", l.Line)
		}
		if strings.HasPrefix(l.Line, "prompt: ") {
			prompt = append(prompt, l.Step+" "+l.Line)
		}
	}
	if len(prompt) != 2 || !strings.Contains(prompt[0], engine.MaskedMark) {
		t.Errorf("prompt lines = %q", prompt)
	}
}
