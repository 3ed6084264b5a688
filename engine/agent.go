package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// DefaultAgentTimeout bounds an agent step whose flow step sets no timeout.
const DefaultAgentTimeout = 5 * time.Minute

// DefaultAgentSlots is how many agent calls may be in flight at once; the
// others wait for a slot, their step timeout starting once they have one.
const DefaultAgentSlots = 32

// AgentCaller calls a language model for an agent step: the engine builds
// the request and checks the reply, the caller (package agents, wired by
// app) speaks to the provider. Call must return promptly once ctx ends (a
// cancel, the step timeout); its errors must not quote the API key.
type AgentCaller interface {
	Call(ctx context.Context, req AgentRequest) (AgentReply, error)
}

// AgentRequest is one agent step's call.
type AgentRequest struct {
	Provider    string   // the server config's provider id
	Model       string   // "" = the provider's model
	MaxTokens   *int     // nil = the provider's
	Temperature *float64 // nil = the provider's
	System      string   // the system prompt, output instructions included
	Prompt      string   // the user message
	// Schema is the JSON Schema the reply must match (nil: free text), for
	// providers with a native structured-output mode.
	Schema map[string]any
}

// AgentReply is what the model answered.
type AgentReply struct {
	Text         string
	Model        string // the model that answered ("" = the one asked)
	InputTokens  int64
	OutputTokens int64
}

// ErrNoAgents is the call error of an engine with no AgentCaller.
var ErrNoAgents = errors.New("no agent providers are configured (the server config has no agents.providers)")

// agentCall is the call of a running agent step, in flight or waiting
// for a slot.
type agentCall struct {
	ctx         context.Context
	cancel      context.CancelFunc
	jobID, name string
	req         AgentRequest
	system      string // the system prompt as written, for the log
}

// agentRequest renders an agent step's prompts in the step's scope (off
// the loop, prepWork) and returns the request and the rendered
// system_prompt alone.
func agentRequest(ctx context.Context, ws *workflow.Workspace, a *workflow.Action, scope map[string]any) (AgentRequest, string, error) {
	prompt, err := ws.Templates.RenderContext(ctx, a.Prompt, scope)
	if err != nil {
		return AgentRequest{}, "", fmt.Errorf("prompt: %w", err)
	}
	system := ""
	if a.SystemPrompt != "" {
		if system, err = ws.Templates.RenderContext(ctx, a.SystemPrompt, scope); err != nil {
			return AgentRequest{}, "", fmt.Errorf("system_prompt: %w", err)
		}
	}
	req := AgentRequest{
		Provider:    a.Provider,
		Model:       a.Model,
		MaxTokens:   a.MaxTokens,
		Temperature: a.Temperature,
		System:      system,
		Prompt:      prompt,
	}
	if len(a.Output) > 0 {
		req.Schema = OutputSchema(a.Output)
		req.System = withSchemaInstructions(system, req.Schema)
	}
	return req, system, nil
}

// OutputSchema is the JSON Schema of an output definition: each field's
// type, description and options (as an enum), and the required ones.
func OutputSchema(out map[string]*workflow.OutputField) map[string]any {
	props := make(map[string]any, len(out))
	var required []string
	for name, f := range out {
		p := map[string]any{"type": f.Type}
		if f.Description != "" {
			p["description"] = f.Description
		}
		if len(f.Options) > 0 {
			p["enum"] = f.Options
		}
		props[name] = p
		if f.Required {
			required = append(required, name)
		}
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		schema["required"] = required
	}
	return schema
}

func withSchemaInstructions(system string, schema map[string]any) string {
	js, _ := json.MarshalIndent(schema, "", "  ")
	instr := "Reply with one JSON object and nothing else (no prose), matching this JSON Schema:\n" + string(js)
	if system == "" {
		return instr
	}
	return system + "\n\n" + instr
}

// startAgent dispatches an agent step, its input and prompts rendered
// (prepWork): it runs on the server, holding no worker, until the call
// comes back (finishAgent) or the step is cancelled or times out, which
// aborts the call (finishStep). With every agent slot taken it waits for
// one (launchAgent), its timeout not yet running.
func (e *Engine) startAgent(b *batch, js *jobState, ss *stepState, input map[string]any, req AgentRequest, systemPrompt string) {
	ss.rec.Input = input
	js.noteInput(ss)
	e.startOnServer(b, js, ss, StepRunning)
	ctx, cancel := context.WithCancel(context.Background())
	call := &agentCall{ctx: ctx, cancel: cancel, jobID: js.job.ID, name: ss.rec.Name, req: req, system: systemPrompt}
	ss.agent = call
	if e.st.agentsInFlight < e.cfg.AgentSlots {
		e.launchAgent(b, js, ss, call)
		return
	}
	e.st.agentQueue = append(e.st.agentQueue, call)
	b.serverLog(js.job.ID, fmt.Sprintf("step %q waits for an agent slot (%d calls in flight)", ss.rec.Name, e.st.agentsInFlight))
}

// launchAgent takes an agent slot for a running step's call: its timeout
// starts now, and the call runs off the loop.
func (e *Engine) launchAgent(b *batch, js *jobState, ss *stepState, call *agentCall) {
	e.st.agentsInFlight++
	deadline := b.now.Add(agentTimeout(ss.flow))
	ss.rec.Deadline = &deadline
	b.dirtyStep(ss.rec)
	model := call.req.Model
	if model == "" {
		model = "its default model"
	}
	b.serverLog(js.job.ID, fmt.Sprintf("step %q calls agent provider %q (%s)", ss.rec.Name, call.req.Provider, model))
	output := ss.action.Output
	b.afterCommit(func() {
		e.armStepTimer(js, ss)
		go e.callAgent(call, output)
	})
}

// agentTimeout is an agent step's timeout: its own or DefaultAgentTimeout.
func agentTimeout(fs *workflow.FlowStep) time.Duration {
	if fs.Timeout > 0 {
		return time.Duration(fs.Timeout)
	}
	return DefaultAgentTimeout
}

// agentSlotFree hands a finished call's slot to the first queued call
// whose step still waits for it (a cancelled one has left it).
func (e *Engine) agentSlotFree(b *batch) {
	e.st.agentsInFlight--
	for len(e.st.agentQueue) > 0 {
		call := e.st.agentQueue[0]
		e.st.agentQueue[0] = nil
		e.st.agentQueue = e.st.agentQueue[1:]
		if js, ss, ok := e.agentStep(call); ok {
			e.launchAgent(b, js, ss, call)
			return
		}
	}
}

// agentStep is the running step a call belongs to, if it still does.
func (e *Engine) agentStep(call *agentCall) (*jobState, *stepState, bool) {
	js, ok := e.st.jobs[call.jobID]
	if !ok || js.job.Terminal() {
		return nil, nil, false
	}
	ss, ok := js.steps[call.name]
	if !ok || ss.agent != call || ss.rec.Status != StepRunning {
		return nil, nil, false
	}
	return js, ss, true
}

// callAgent runs off the loop: it logs the prompts, calls the provider,
// checks the reply and hands the result to the loop.
func (e *Engine) callAgent(call *agentCall, output map[string]*workflow.OutputField) {
	defer call.cancel()
	out, err := e.runAgent(call.ctx, call.jobID, call.name, call.req, call.system, output)
	e.post(func(b *batch) (any, error) {
		e.finishAgent(b, call, out, err)
		return nil, nil
	})
}

// runAgent logs the step's system prompt (as written, without the schema
// instructions), its schema and prompt, then calls the provider.
func (e *Engine) runAgent(ctx context.Context, jobID, name string, req AgentRequest, systemPrompt string, output map[string]*workflow.OutputField) (map[string]any, error) {
	if e.cfg.Agents == nil {
		return nil, fmt.Errorf("provider %q is not configured: %w", req.Provider, ErrNoAgents)
	}
	now := e.clock.Now()
	var lines []LogLine
	lines = appendPrefixed(lines, name, "system: ", systemPrompt, now)
	if req.Schema != nil {
		schema, _ := json.Marshal(req.Schema)
		lines = appendPrefixed(lines, name, "output schema: ", string(schema), now)
	}
	lines = appendPrefixed(lines, name, "prompt: ", req.Prompt, now)
	e.agentLog(jobID, lines)

	start := time.Now()
	reply, err := e.cfg.Agents.Call(ctx, req)
	latency := time.Since(start)
	if err != nil {
		return nil, err
	}
	e.agentLog(jobID, appendPrefixed(nil, name, "reply: ", reply.Text, e.clock.Now()))
	model := reply.Model
	if model == "" {
		model = req.Model
	}
	meta := map[string]any{
		"provider":   req.Provider,
		"model":      model,
		"tokens":     map[string]any{"input": reply.InputTokens, "output": reply.OutputTokens},
		"latency_ms": latency.Milliseconds(),
	}
	if req.Schema == nil {
		return map[string]any{"text": reply.Text, "_meta": meta}, nil
	}
	obj, err := ParseAgentReply(reply.Text, req.Schema, output)
	if err != nil {
		return nil, err
	}
	obj["_meta"] = meta
	return obj, nil
}

// agentLog writes an agent step's lines through AppendLog (secrets masked).
func (e *Engine) agentLog(jobID string, lines []LogLine) {
	if len(lines) == 0 {
		return
	}
	if err := e.AppendLog(jobID, lines); err != nil {
		e.log.Warn("agent step: cannot write its log lines", "job", jobID, "err", err)
	}
}

// appendPrefixed adds text as the step's log lines, one per line of text,
// each starting with prefix; empty text adds none.
func appendPrefixed(lines []LogLine, step, prefix, text string, now time.Time) []LogLine {
	if strings.TrimSpace(text) == "" {
		return lines
	}
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		lines = append(lines, LogLine{TS: now, Stream: "stdout", Step: step, Line: prefix + strings.TrimRight(l, "\r")})
	}
	return lines
}

// finishAgent applies an agent call's result, while the step still waits
// for that call (a cancel or a timeout in between drops it).
func (e *Engine) finishAgent(b *batch, call *agentCall, out map[string]any, err error) {
	e.agentSlotFree(b)
	js, ss, ok := e.agentStep(call)
	if !ok {
		return
	}
	ss.agent = nil
	if err != nil {
		e.fail(b, js, ss, "agent: "+err.Error())
		return
	}
	ss.rec.Output = out
	e.finishStep(b, ss, StepCompleted, nil)
	e.stepDone(b, js, ss)
}

// abortAgent ends a running agent step's call, if any: its HTTP request
// is cancelled at once.
func (ss *stepState) abortAgent() {
	if ss.agent != nil {
		ss.agent.cancel()
		ss.agent = nil
	}
}
