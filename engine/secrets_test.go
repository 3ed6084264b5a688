package engine_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

func TestSecretValuesListsWhatLogsMustNotShow(t *testing.T) {
	f := enginetest.New(t, `
secrets:
  TOKEN: workspace-token
actions:
  use-key:
    type: script
    input:
      key: {type: string, secret: true}
      label: {type: string}
    script: "true"
tasks:
  t:
    input:
      pin: {type: string, secret: true}
      short: {type: string, secret: true}
      name: {type: string}
    flow:
      a:
        action: use-key
        input: {key: step-key-value, label: plain-label}
`)
	job := f.Execute("t", map[string]any{"pin": "pin-1234", "short": "ab", "name": "not-secret"})
	f.WaitStep(job, "a", "ready")
	got, err := f.Engine.SecretValues(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"workspace-token", "step-key-value", "pin-1234"} // longest first; "ab" too short
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("secret values %q, want %q", got, want)
	}
}

const leakYAML = `
secrets:
  TOKEN: workspace-token
actions:
  notify:
    type: script
    input:
      message: {type: string}
    script: echo "{{ input.message }}"
tasks:
  leak:
    input:
      pin: {type: string, secret: true}
    flow:
      talk: {type: script, script: "echo {{ input.pin }} >&2; exit 1"}
    on_error:
      - action: notify
        input:
          message: "{{ hook.error_message }} | {{ hook.failed_steps[0].error_message }} | {{ secret.TOKEN }}"
`

func TestFailedStepMessageAndHookContextAreMasked(t *testing.T) {
	f := enginetest.New(t, leakYAML)
	job := f.Execute("leak", map[string]any{"pin": "pin-1234"})
	f.RunStep("talk", enginetest.Fail(1, "Exit code: 1\npin-1234 workspace-token"))
	f.WaitStatus(job, engine.JobFailed)

	if msg := f.Step(job, "talk").ErrorMessage; msg == nil || *msg != "Exit code: 1\n*** ***" {
		t.Fatalf("recorded error_message %q, want the secrets masked", deref(msg))
	}
	hooks := hookJobs(t, f, job)
	if len(hooks) != 1 {
		t.Fatalf("hook jobs %+v", hooks)
	}
	// The hook context is masked; a secret the hook names itself reaches
	// the hook job, as it would any step that names it.
	want := "talk: Exit code: 1\n*** *** | Exit code: 1\n*** *** | workspace-token"
	if got := hooks[0].Input["message"]; got != want {
		t.Fatalf("hook job input %q, want %q", got, want)
	}
}

func TestServerMadeStepErrorsAreMasked(t *testing.T) {
	f := enginetest.New(t, `
secrets:
  TOKEN: workspace-token
actions:
  count:
    type: script
    input:
      n: {type: integer}
    script: "true"
tasks:
  t:
    flow:
      a:
        action: count
        input: {n: "{{ secret.TOKEN }}"}
`)
	job := f.Execute("t", nil)
	f.WaitStatus(job, engine.JobFailed)
	msg := f.Step(job, "a").ErrorMessage
	if msg == nil || strings.Contains(*msg, "workspace-token") || !strings.Contains(*msg, `"***"`) {
		t.Fatalf("error_message %q, want the rendered secret masked", deref(msg))
	}
}

func TestMaskValueMasksEveryStringAndLeavesTheOriginal(t *testing.T) {
	in := map[string]any{"a": "x pin-1234 y", "list": []any{"pin-1234", 3.0, map[string]any{"k": "pin-12345"}}, "n": nil}
	got := engine.MaskValue(in, []string{"pin-12345", "pin-1234"})
	want := map[string]any{"a": "x *** y", "list": []any{"***", 3.0, map[string]any{"k": "***"}}, "n": nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("masked %v, want %v", got, want)
	}
	if in["a"] != "x pin-1234 y" {
		t.Fatal("MaskValue changed its argument")
	}
}

const laterSecretYAML = `
secrets:
  TOKEN: workspace-token
actions:
  use-key:
    type: script
    input:
      key: {type: string, secret: true}
    script: "true"
  ask:
    type: approval
    message: "approve {{ input.key }}"
    input:
      key: {type: string}
tasks:
  t:
    input:
      pin: {type: string, secret: true}
      later: {type: string}
    flow:
      a: {type: script, script: "true"}
      b:
        depends_on: [a]
        action: use-key
        input: {key: "{{ input.later }}"}
      c:
        depends_on: [b]
        action: ask
        input: {key: "{{ input.later }}"}
`

// pushed appends a worker's line for step through the engine and returns
// the line as the log got it.
func pushed(t *testing.T, f *enginetest.Fixture, job, step, line string) string {
	t.Helper()
	if err := f.Engine.AppendLog(job, []engine.LogLine{{Stream: "stdout", Step: step, Line: line}}); err != nil {
		t.Fatal(err)
	}
	lines := f.Logs.Lines(job)
	return lines[len(lines)-1].Line
}

func TestLogLinesAreMaskedWithEachSecretFromWhenTheJobLearnsIt(t *testing.T) {
	f := enginetest.New(t, laterSecretYAML)
	job := f.Execute("t", map[string]any{"pin": "pin-1234", "later": "later-value"})
	const line = "pin-1234 workspace-token later-value"

	// Built: the job's secret input and the workspace's secrets.
	if got := pushed(t, f, job, "a", line); got != "*** *** later-value" {
		t.Fatalf("line before b resolved = %q", got)
	}
	f.RunStep("a", enginetest.Ok(nil))
	f.WaitStep(job, "b", engine.StepReady)
	// b's input resolved: its secret field joined the job's secrets.
	if got := pushed(t, f, job, "b", line); got != "*** *** ***" {
		t.Fatalf("line after b resolved = %q", got)
	}
	f.RunStep("b", enginetest.Ok(nil))
	f.WaitStep(job, "c", engine.StepWaiting)
	// The engine's own lines go the same way: the approval's message
	// quotes the secret.
	server := f.Logs.ServerLines(job)
	if last := server[len(server)-1]; !strings.Contains(last, "approve ***") {
		t.Fatalf("server line %q, want the secret masked", last)
	}

	// After a restart the loaded job knows them all again.
	f.Restart()
	if got := pushed(t, f, job, "c", line); got != "*** *** ***" {
		t.Fatalf("line after a restart = %q", got)
	}
	// Ended, the job is no longer in memory: its secrets come from the store.
	if err := f.Engine.CancelJob(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(job, engine.JobCancelled)
	if got := pushed(t, f, job, "c", line); got != "*** *** ***" {
		t.Fatalf("line after the job ended = %q", got)
	}
	got, err := f.Engine.SecretValues(t.Context(), job)
	if want := []string{"workspace-token", "later-value", "pin-1234"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("secret values of the ended job %q (%v), want %q", got, err, want)
	}
}

// Masking a live job's pushed lines uses the secrets the job keeps in
// memory: a push reads nothing from the store (issue: 37 ms per push for a
// large for_each when each one re-read the job).
func TestMaskingALiveJobsLogPushReadsNoStore(t *testing.T) {
	f := enginetest.New(t, laterSecretYAML)
	job := f.Execute("t", map[string]any{"pin": "pin-1234", "later": "later-value"})
	f.RunStep("a", enginetest.Ok(nil))
	f.WaitStep(job, "b", engine.StepReady)
	before := f.Store.JobReads()
	for range 100 {
		if got := pushed(t, f, job, "b", "pin-1234 workspace-token later-value"); got != "*** *** ***" {
			t.Fatalf("pushed line = %q", got)
		}
	}
	if reads := f.Store.JobReads() - before; reads != 0 {
		t.Fatalf("100 pushes to a live job read the store %d times, want 0", reads)
	}
}

func TestApproverSecretInputIsMaskedWhileLiveAndAfterTheJobEnded(t *testing.T) {
	f := enginetest.New(t, `
actions:
  ask:
    type: approval
    message: "go?"
    input:
      code: {type: string, secret: true}
tasks:
  t:
    flow:
      gate: {action: ask}
      after: {type: script, script: "true", depends_on: [gate]}
`)
	job := f.Execute("t", nil)
	f.WaitStep(job, "gate", engine.StepWaiting)
	if err := f.Engine.Approve(t.Context(), job, "gate", engine.Approval{Approved: true, By: "ada", Input: map[string]any{"code": "approver-code"}}); err != nil {
		t.Fatal(err)
	}
	f.WaitStep(job, "after", engine.StepReady)
	if got := pushed(t, f, job, "after", "code approver-code"); got != "code ***" {
		t.Fatalf("line of the live job = %q", got)
	}
	f.Restart()
	if got := pushed(t, f, job, "after", "code approver-code"); got != "code ***" {
		t.Fatalf("line of the job loaded again = %q", got)
	}
	f.RunStep("after", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)
	if got := pushed(t, f, job, "after", "code approver-code"); got != "code ***" {
		t.Fatalf("line of the ended job = %q", got)
	}
}

// Lines whose secrets cannot be known are refused, never written unmasked:
// here the job has ended and its workspace is no longer loaded, so nothing
// says which of its values are secret.
func TestLinesOfAJobWhoseSecretsAreUnknownAreRefused(t *testing.T) {
	f := enginetest.New(t, laterSecretYAML)
	job := f.Execute("t", map[string]any{"pin": "pin-1234", "later": "later-value"})
	if err := f.Engine.CancelJob(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	f.Workspaces.Remove(enginetest.WorkspaceName)
	before := len(f.Logs.Lines(job))
	err := f.Engine.AppendLog(job, []engine.LogLine{{Step: "b", Stream: "stdout", Line: "pin-1234"}})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("append = %v, want refused as not found", err)
	}
	if lines := f.Logs.Lines(job); len(lines) != before {
		t.Fatalf("log grew to %v", lines)
	}
}
