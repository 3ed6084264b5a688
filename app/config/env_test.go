package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// ${ENV} expands inside the one scalar that names it, after parsing: what
// a variable holds can never add keys, items or documents.
func TestConfigEnvExpandsOnlyInsideScalarValues(t *testing.T) {
	t.Setenv("APPLIANCE_T_NEWLINE", "line one\ninjected: true\n- item")
	t.Setenv("APPLIANCE_T_COLON", "host: evil")
	t.Setenv("APPLIANCE_T_TEMPLATE", "{{ secret.x }} {% if %}")
	t.Setenv("APPLIANCE_T_PORT", "8080")
	t.Setenv("APPLIANCE_T_BOOL", "true")
	t.Setenv("APPLIANCE_T_EMPTY", "")
	t.Setenv("APPLIANCE_T_FLOW", "[a, b]")
	t.Setenv("APPLIANCE_T_DOC", "x\n---\ny: 1")
	os.Unsetenv("APPLIANCE_T_UNSET")

	for _, tc := range []struct {
		name string
		yaml string
		want map[string]any
	}{
		{"newline stays in the value", "a: ${APPLIANCE_T_NEWLINE}\n", map[string]any{"a": "line one\ninjected: true\n- item"}},
		{"newline in a quoted value", "a: \"${APPLIANCE_T_NEWLINE}\"\n", map[string]any{"a": "line one\ninjected: true\n- item"}},
		{"colon stays in the value", "a: ${APPLIANCE_T_COLON}\nb: 1\n", map[string]any{"a": "host: evil", "b": uint64(1)}},
		{"template text is kept as is", "a: '${APPLIANCE_T_TEMPLATE}'\n", map[string]any{"a": "{{ secret.x }} {% if %}"}},
		{"flow syntax is not parsed", "a: ${APPLIANCE_T_FLOW}\n", map[string]any{"a": "[a, b]"}},
		{"a document marker is not parsed", "a: ${APPLIANCE_T_DOC}\n", map[string]any{"a": "x\n---\ny: 1"}},
		{"inside a larger value", "a: http://${APPLIANCE_T_COLON}:${APPLIANCE_T_PORT}/x\n", map[string]any{"a": "http://host: evil:8080/x"}},
		{"unquoted number", "a: ${APPLIANCE_T_PORT}\n", map[string]any{"a": uint64(8080)}},
		{"quoted number stays a string", "a: \"${APPLIANCE_T_PORT}\"\n", map[string]any{"a": "8080"}},
		{"unquoted boolean", "a: ${APPLIANCE_T_BOOL}\n", map[string]any{"a": true}},
		{"default when unset", "a: '${APPLIANCE_T_UNSET:-fallback: x}'\n", map[string]any{"a": "fallback: x"}},
		{"default when empty", "a: ${APPLIANCE_T_EMPTY:-d}\n", map[string]any{"a": "d"}},
		{"explicit empty default", "a: \"${APPLIANCE_T_UNSET:-}\"\n", map[string]any{"a": ""}},
		{"set but empty", "a: \"${APPLIANCE_T_EMPTY}\"\n", map[string]any{"a": ""}},
		{"sequence items", "a:\n  - ${APPLIANCE_T_COLON}\n  - ${APPLIANCE_T_PORT}\n", map[string]any{"a": []any{"host: evil", uint64(8080)}}},
		{"block scalar", "a: |\n  first\n  ${APPLIANCE_T_COLON}\n", map[string]any{"a": "first\nhost: evil\n"}},
		{"keys are not expanded", "${APPLIANCE_T_PORT}: v\n", map[string]any{"${APPLIANCE_T_PORT}": "v"}},
		{"flow mapping", "a: {email: x, password: ${APPLIANCE_T_COLON}}\n", map[string]any{"a": map[string]any{"email": "x", "password": "host: evil"}}},
		{"flow sequence", "a: [${APPLIANCE_T_NEWLINE}, ${APPLIANCE_T_PORT}]\n", map[string]any{"a": []any{"line one\ninjected: true\n- item", uint64(8080)}}},
		{"flow value with a default holding a colon", "a: {b: '${APPLIANCE_T_UNSET:-x: y}'}\n", map[string]any{"a": map[string]any{"b": "x: y"}}},
		{"a reference in a comment is ignored", "# ${APPLIANCE_T_UNSET}\na: 1 # ${APPLIANCE_T_UNSET}\n", map[string]any{"a": uint64(1)}},
		{"anchored values expand once for every alias", "a: &x ${APPLIANCE_T_COLON}\nb: *x\n", map[string]any{"a": "host: evil", "b": "host: evil"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := decodeConfigFile(path, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestConfigEnvErrorsNameTheVariableAndItsLine(t *testing.T) {
	os.Unsetenv("APPLIANCE_T_UNSET")
	t.Setenv("APPLIANCE_T_TRUE", "true")
	for _, tc := range []struct{ name, yaml, want string }{
		{"unset", "listen: x\nworker_token: ${APPLIANCE_T_UNSET}\n", "2:15: environment variable APPLIANCE_T_UNSET is not set (write ${APPLIANCE_T_UNSET:-} for empty, or ${APPLIANCE_T_UNSET:-default})"},
		{"unset in a quoted value", "a:\n  b: \"x ${APPLIANCE_T_UNSET}\"\n", "2:9: environment variable APPLIANCE_T_UNSET is not set"},
		{"unset in a block scalar", "a: |\n  one\n  two ${APPLIANCE_T_UNSET}\n", "3:"},
		{"unset in a sequence", "a:\n  - ok\n  - ${APPLIANCE_T_UNSET}\n", "3:5: environment variable APPLIANCE_T_UNSET"},
		{"unterminated", "a: x ${APPLIANCE_T_UNSET\n", `1:6: unterminated "${"`},
		{"unset in a flow mapping", "a: {b: 1, c: ${APPLIANCE_T_UNSET}}\n", "1:14: environment variable APPLIANCE_T_UNSET is not set"},
		{"syntax error after a reference keeps its column", "a: {b: ${APPLIANCE_T_UNSET:-x}, c: [}\n", "1:37: "},
		{"type error at the reference", "listen: x\nworkers: ${APPLIANCE_T_TRUE}\n", "2:10: "},
		{"bad name", "a: ${1X}\n", "1:4: bad reference ${1X}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var got struct {
				A       any    `yaml:"a"`
				Listen  string `yaml:"listen"`
				Workers int    `yaml:"workers"`
			}
			err := decodeConfigFile(path, &got)
			if err == nil || !strings.HasPrefix(err.Error(), path+":"+tc.want) {
				t.Fatalf("error %v, want %s:%s...", err, path, tc.want)
			}
		})
	}
}

// Both config files go through the expansion.
func TestServerAndWorkerConfigsExpandEnvInValues(t *testing.T) {
	t.Setenv("APPLIANCE_T_TOKEN", "tok: with\nnewline")
	os.Unsetenv("APPLIANCE_T_UNSET")
	dir := t.TempDir()
	wpath := filepath.Join(dir, "worker-config.yaml")
	os.WriteFile(wpath, []byte("server_url: http://x\nworker_token: ${APPLIANCE_T_TOKEN}\n"), 0o600)
	wc, err := LoadWorker(wpath)
	if err != nil {
		t.Fatal(err)
	}
	if wc.Token != "tok: with\nnewline" {
		t.Errorf("worker token %q", wc.Token)
	}
	spath := filepath.Join(dir, "server-config.yaml")
	os.WriteFile(spath, []byte("data_dir: ${APPLIANCE_T_UNSET:-/srv/data}\nworker_token: ${APPLIANCE_T_TOKEN}\n"), 0o600)
	sc, err := LoadServer(spath)
	if err != nil {
		t.Fatal(err)
	}
	if sc.WorkerToken != "tok: with\nnewline" || sc.DataDir != "/srv/data" {
		t.Errorf("server config data_dir %q, worker_token %q", sc.DataDir, sc.WorkerToken)
	}
}
