package workspace

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(JSONSchema()))
	if err != nil {
		t.Fatalf("the schema is not valid JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("workflow.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("workflow.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return sch
}

// yamlDoc decodes YAML into the JSON data model the validator expects.
func yamlDoc(t *testing.T, src []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestExampleFilesValidateAgainstTheSchema(t *testing.T) {
	sch := compileSchema(t)
	files, _ := filepath.Glob("../../examples/.workflows/*.y*ml")
	if len(files) == 0 {
		t.Fatal("no example workflow files found")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(yamlDoc(t, src)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSchemaRejectsWhatTheLoaderRejects(t *testing.T) {
	sch := compileSchema(t)
	cases := []struct{ name, src string }{
		{"unknown top-level key", "task: {}"},
		{"image on a script action", "actions: {a: {type: script, script: echo, image: alpine}}"},
		{"runner on a docker action", "actions: {a: {type: docker, image: alpine, runner: local}}"},
		{"env on a task action", "actions: {a: {type: task, task: t, env: {A: b}}}"},
		{"script and source together", "actions: {a: {type: script, script: echo, source: x.sh}}"},
		{"neither script nor source", "actions: {a: {type: script}}"},
		{"manifest without runner pod", "actions: {a: {type: script, script: echo, manifest: {}}}"},
		{"dependencies with shell", "actions: {a: {type: script, script: echo, dependencies: [x]}}"},
		{"docker without image", "actions: {a: {type: docker}}"},
		{"temperature over 2", "actions: {a: {type: agent, provider: p, prompt: hi, temperature: 3}}"},
		{"task without flow", "tasks: {t: {name: T}}"},
		{"step with action and inline fields", "tasks: {t: {flow: {s: {action: a, image: alpine}}}}"},
		{"step name with brackets", "tasks: {t: {flow: {'s[0]': {script: echo}}}}"},
		{"bad duration", "tasks: {t: {timeout: 5 minutes, flow: {s: {script: echo}}}}"},
		{"webhook name with a slash", "triggers: {h: {type: webhook, name: a/b, task: t}}"},
		{"cron field on a webhook", "triggers: {h: {type: webhook, name: h, task: t, cron: '* * * * *'}}"},
		{"timeout_secs over 300", "triggers: {h: {type: webhook, name: h, task: t, timeout_secs: 301}}"},
		{"unknown concurrency", "triggers: {c: {type: scheduler, cron: '* * * * *', task: t, concurrency: never}}"},
		{"retries over 10", "tasks: {t: {flow: {s: {script: echo, retries: 11}}}}"},
		{"retry backoff under 1", "actions: {a: {type: script, script: echo, retry_backoff: 0.5}}"},
		{"retries on an approval action", "actions: {a: {type: approval, retries: 1}}"},
		{"empty when", "tasks: {t: {flow: {s: {script: echo, when: ''}}}}"},
		{"task concurrency without limit", "tasks: {t: {concurrency: {key: x}, flow: {s: {script: echo}}}}"},
		{"task concurrency as a trigger's word", "tasks: {t: {concurrency: skip, flow: {s: {script: echo}}}}"},
		{"unknown on_limit", "tasks: {t: {concurrency: {limit: 1, on_limit: wait}, flow: {s: {script: echo}}}}"},
	}
	for _, c := range cases {
		if err := sch.Validate(yamlDoc(t, []byte(c.src))); err == nil {
			t.Errorf("%s: the schema accepted %s", c.name, c.src)
		}
	}
}

func TestSchemaAcceptsWhatTheLoaderAccepts(t *testing.T) {
	sch := compileSchema(t)
	srcs := []string{
		"tasks: {t: {flow: {s: {script: echo, depends_on: []}, u: {type: docker, image: alpine, depends_on: [s]}}}}",
		"actions: {a: {type: agent, provider: p, prompt: hi, max_tokens: 10, output: {ok: {type: boolean}}}}",
		"actions: {a: {type: approval, message: 'ok?'}, b: {type: task, task: t}}\ntasks: {t: {flow: {s: {action: a}}}}",
		"actions: {a: {type: script, runner: pod, script: echo, manifest: {spec: {}}}}",
		"triggers: {e: {type: event_source, task: t, target_task: t, env: {A: b}, max_in_flight: 2}}\ntasks: {t: {flow: {s: {script: echo}}}}",
		"tasks: {t: {queue: deploys, concurrency: {limit: 2, key: '{{ input.env }}', on_limit: skip, priority: 5}, flow: {s: {script: echo}}}}",
		"connection_types: {db: {host: {type: string, required: true}}}\nconnections: {main: {type: db, host: x}}",
		"actions: {a: {type: script, script: echo, retries: 3, retry_delay: 30s, retry_backoff: 1.5}}\ntasks: {t: {flow: {s: {action: a, retries: 1}, u: {script: echo, retries: 10, retry_delay: 5m}}}}",
	}
	for _, src := range srcs {
		if _, errs := loadMain(t, src); errs != nil {
			t.Errorf("the loader rejected %s:\n%v", src, errs)
		}
		if err := sch.Validate(yamlDoc(t, []byte(src))); err != nil {
			t.Errorf("the schema rejected %s: %v", src, err)
		}
	}
}

// TestSchemaDescribesEveryKeyTheLoaderAccepts keeps the hand-written schema
// and the loader's key sets from drifting apart.
func TestSchemaDescribesEveryKeyTheLoaderAccepts(t *testing.T) {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(JSONSchema(), &s); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]json.RawMessage) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	cases := []struct {
		what   string
		schema []string
		loader map[string]bool
	}{
		{"top level", keys(s.Properties), topKeys},
		{"action", keys(s.Defs["action"].Properties), allActionKeys},
		{"flow step", keys(s.Defs["flowStep"].Properties), stepAndActionKeys},
		{"task", keys(s.Defs["task"].Properties), taskKeys},
		{"trigger", keys(s.Defs["trigger"].Properties), allTriggerKeys},
		{"input field", keys(s.Defs["inputField"].Properties), inputFieldKeys},
		{"output field", keys(s.Defs["outputField"].Properties), outputFieldKeys},
		{"hook", keys(s.Defs["hook"].Properties), hookKeys},
		{"connection property", keys(s.Defs["connectionProperty"].Properties), connPropKeys},
	}
	for _, c := range cases {
		if got, want := strings.Join(c.schema, " "), strings.Join(keysOf(c.loader), " "); got != want {
			t.Errorf("%s keys differ:\nschema %s\nloader %s", c.what, got, want)
		}
	}
}
