package workspace

import (
	"regexp"
	"strings"
	"time"

	// Zone names must validate the same on every machine, with or without
	// a system zoneinfo database.
	_ "time/tzdata"

	"github.com/goccy/go-yaml/ast"

	"github.com/appliance-sh/appliance/engine/cron"
	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/workflow"
)

var commonTriggerKeys = set("type", "task", "input", "enabled")

var typeTriggerKeys = map[string]map[string]bool{
	workflow.TriggerScheduler:   set("cron", "timezone", "concurrency"),
	workflow.TriggerWebhook:     set("name", "secret", "mode", "timeout_secs"),
	workflow.TriggerEventSource: set("target_task", "env", "restart_policy", "backoff_secs", "max_in_flight"),
}

var allTriggerKeys = union(commonTriggerKeys, typeTriggerKeys[workflow.TriggerScheduler],
	typeTriggerKeys[workflow.TriggerWebhook], typeTriggerKeys[workflow.TriggerEventSource])

// Value sets of trigger fields.
var (
	concurrencies   = set("allow", "skip", "cancel_previous")
	webhookModes    = set("async", "sync")
	restartPolicies = set("always", "on_failure", "never")
	webhookNameRe   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

func (l *loader) trigger(key string, n node) *workflow.Trigger {
	o, ok := n.object(allTriggerKeys)
	if !ok {
		return nil
	}
	t := &workflow.Trigger{Name: key, Enabled: true}
	if !o.require("type") {
		return nil
	}
	t.Type = o.str("type")
	extra, ok := typeTriggerKeys[t.Type]
	if !ok {
		if tn, _ := o.get("type"); t.Type != "" {
			tn.errorf("unknown trigger type %q%s", t.Type, suggest(t.Type, keysOfMap(typeTriggerKeys)))
		}
		return nil
	}
	for _, k := range o.keys {
		if !commonTriggerKeys[k] && !extra[k] {
			o.m[k].k.errorf("not allowed for %s triggers", t.Type)
			delete(o.m, k)
		}
	}
	o.require("task")
	t.Task = o.str("task")
	if v, ok := o.get("enabled"); ok {
		t.Enabled, _ = v.boolean()
	}
	if v, ok := o.get("input"); ok {
		raw := v.value()
		if m, isMap := raw.(map[string]any); isMap {
			t.Input = m
		} else if raw != nil {
			v.errorf("expected a mapping, got %s", kind(v.resolve()))
		}
	}
	switch t.Type {
	case workflow.TriggerScheduler:
		l.scheduler(o, t)
	case workflow.TriggerWebhook:
		l.webhook(o, t)
	case workflow.TriggerEventSource:
		l.eventSource(o, t)
	}
	return t
}

func (l *loader) scheduler(o obj, t *workflow.Trigger) {
	o.require("cron")
	if v, ok := o.get("cron"); ok {
		t.Cron, _ = v.text()
		if msg := cronProblem(t.Cron); msg != "" {
			v.errorf("%s", msg)
		}
	}
	t.Timezone = "UTC"
	if v, ok := o.get("timezone"); ok {
		tz, _ := v.str()
		if _, err := time.LoadLocation(tz); err != nil || tz == "" || tz == "Local" {
			v.errorf("unknown timezone %q (use an IANA name such as Europe/Paris)", tz)
		} else {
			t.Timezone = tz
		}
	}
	if v, ok := o.get("concurrency"); ok {
		if _, isMap := v.resolve().(*ast.MappingNode); isMap {
			v.errorf("a scheduler trigger's concurrency is one of allow, skip, cancel_previous; a limit such as {limit: 1} goes on the task (tasks.%s.concurrency)", t.Task)
			return
		}
	}
	t.Concurrency = oneOf(o, "concurrency", "allow", concurrencies)
}

// cronProblem explains what is wrong with a cron expression, or returns "";
// the scheduler reads expressions with the same parser.
func cronProblem(expr string) string {
	if _, err := cron.Parse(expr); err != nil {
		return "invalid cron expression " + strings.TrimPrefix(err.Error(), "cron ")
	}
	return ""
}

func (l *loader) webhook(o obj, t *workflow.Trigger) {
	o.require("name")
	if v, ok := o.get("name"); ok {
		t.WebhookName, _ = v.text()
		if t.WebhookName != "" && !webhookNameRe.MatchString(t.WebhookName) {
			v.errorf("webhook name %q is not URL-safe: use letters, digits, - and _", t.WebhookName)
		}
	}
	if v, ok := o.get("secret"); ok {
		t.Secret, _ = v.text()
		if template.IsTemplate(t.Secret) {
			out, err := l.ws.Templates.Render(t.Secret, l.secretVars())
			if err != nil {
				v.errorf("render webhook secret: %v", err)
			}
			t.Secret = out
		}
	}
	t.Mode = oneOf(o, "mode", "async", webhookModes)
	t.TimeoutSecs = 30
	if v, ok := o.get("timeout_secs"); ok {
		if n, ok := v.integer(); ok {
			if n < 1 || n > 300 {
				v.errorf("must be between 1 and 300, got %d", n)
			} else {
				t.TimeoutSecs = n
			}
		}
	}
}

func (l *loader) eventSource(o obj, t *workflow.Trigger) {
	o.require("target_task")
	t.TargetTask = o.str("target_task")
	if v, ok := o.get("env"); ok {
		t.Env = l.templateMap(v)
	}
	t.RestartPolicy = oneOf(o, "restart_policy", "always", restartPolicies)
	t.BackoffSecs = 5
	if v, ok := o.get("backoff_secs"); ok {
		if n, ok := v.integer(); ok {
			if n < 0 {
				v.errorf("must not be negative")
			} else {
				t.BackoffSecs = n
			}
		}
	}
	if v, ok := o.get("max_in_flight"); ok {
		if n, ok := v.integer(); ok {
			if n < 0 {
				v.errorf("must not be negative (omit it for unlimited)")
			} else {
				t.MaxInFlight = n
			}
		}
	}
}

// oneOf reads an enumerated string field, or returns def when it is absent.
func oneOf(o obj, key, def string, allowed map[string]bool) string {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	s, ok := v.str()
	if !ok {
		return def
	}
	if !allowed[s] {
		v.errorf("unknown %s %q%s (one of: %s)", strings.ReplaceAll(key, "_", " "), s, suggest(s, keysOf(allowed)), strings.Join(keysOf(allowed), ", "))
		return def
	}
	return s
}
