package workflow

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
)

func inputWorkspace() *Workspace {
	return &Workspace{
		Name:    "ws",
		Secrets: map[string]string{"DB_PASSWORD": "hunter2", "REGION": "eu-west-1"},
		ConnectionTypes: map[string]*ConnectionType{
			"postgres": {Properties: map[string]*InputField{"host": {Type: InputString}, "password": {Type: InputString}}},
			"s3":       {Properties: map[string]*InputField{"bucket": {Type: InputString}}},
		},
		Connections: map[string]*Connection{
			"main-db": {Type: "postgres", Values: map[string]any{"host": "db.local", "password": "hunter2", "opts": map[string]any{"ssl": true}}},
			"backups": {Type: "s3", Values: map[string]any{"bucket": "bk"}},
			"untyped": {Values: map[string]any{"x": 1}},
		},
		Templates: template.NewSet(),
	}
}

// fields builds Inputs in the order given.
func fields(kv ...any) *Inputs {
	in := &Inputs{Fields: map[string]*InputField{}}
	for i := 0; i < len(kv); i += 2 {
		name := kv[i].(string)
		in.Fields[name] = kv[i+1].(*InputField)
		in.Order = append(in.Order, name)
	}
	return in
}

func TestResolveInputAcceptsAndCoerces(t *testing.T) {
	when := time.Date(2024, 3, 1, 12, 30, 0, 0, time.UTC)
	tests := []struct {
		name  string
		field *InputField
		given any // nil = not given
		want  any
	}{
		// defaults
		{"default used when missing", &InputField{Type: InputString, Default: "dev"}, nil, "dev"},
		{"default rendered with secret", &InputField{Type: InputString, Default: "{{ secret.DB_PASSWORD }}"}, nil, "hunter2"},
		{"default rendered with secrets", &InputField{Type: InputString, Default: "region={{ secrets.REGION }}"}, nil, "region=eu-west-1"},
		{"non-string default passes through", &InputField{Type: InputInteger, Default: 5}, nil, int64(5)},
		{"given value beats default", &InputField{Type: InputString, Default: "dev"}, "prod", "prod"},
		{"blank number takes default", &InputField{Type: InputInteger, Default: 2}, " ", int64(2)},
		{"optional without default is null, never undefined", &InputField{Type: InputString}, nil, nil},
		{"required given", &InputField{Type: InputString, Required: true}, "x", "x"},
		{"required with default", &InputField{Type: InputString, Required: true, Default: "d"}, nil, "d"},
		// string and text
		{"string", &InputField{Type: InputString}, "hello", "hello"},
		{"empty string is a string", &InputField{Type: InputString, Default: "d"}, "", ""},
		{"text", &InputField{Type: InputText}, "a\nb", "a\nb"},
		{"string from int", &InputField{Type: InputString}, 42, "42"},
		{"string from float", &InputField{Type: InputString}, 2.5, "2.5"},
		{"string from integral float", &InputField{Type: InputString}, 3.0, "3"},
		{"string from bool", &InputField{Type: InputText}, true, "true"},
		// integer
		{"integer from int", &InputField{Type: InputInteger}, 7, int64(7)},
		{"integer from integral float", &InputField{Type: InputInteger}, 7.0, int64(7)},
		{"integer from string", &InputField{Type: InputInteger}, " 12 ", int64(12)},
		{"integer from negative string", &InputField{Type: InputInteger}, "-3", int64(-3)},
		{"integer from float string", &InputField{Type: InputInteger}, "4.0", int64(4)},
		// number
		{"number from float", &InputField{Type: InputNumber}, 2.5, 2.5},
		{"number from int", &InputField{Type: InputNumber}, 2, 2.0},
		{"number from string", &InputField{Type: InputNumber}, "1e3", 1000.0},
		// boolean
		{"boolean true", &InputField{Type: InputBoolean}, true, true},
		{"boolean false given is kept", &InputField{Type: InputBoolean, Default: true}, false, false},
		{"boolean from string", &InputField{Type: InputBoolean}, "TRUE", true},
		{"boolean from false string", &InputField{Type: InputBoolean}, "false", false},
		// date and datetime
		{"date", &InputField{Type: InputDate}, "2024-02-29", "2024-02-29"},
		{"date from time", &InputField{Type: InputDate}, when, "2024-03-01"},
		{"datetime minutes", &InputField{Type: InputDatetime}, "2024-03-01T12:30", "2024-03-01T12:30"},
		{"datetime seconds", &InputField{Type: InputDatetime}, "2024-03-01T12:30:05", "2024-03-01T12:30:05"},
		{"datetime Z", &InputField{Type: InputDatetime}, "2024-03-01T12:30:05Z", "2024-03-01T12:30:05Z"},
		{"datetime offset", &InputField{Type: InputDatetime}, "2024-03-01T12:30+02:00", "2024-03-01T12:30+02:00"},
		{"datetime fraction", &InputField{Type: InputDatetime}, "2024-03-01T12:30:05.123Z", "2024-03-01T12:30:05.123Z"},
		{"datetime from time", &InputField{Type: InputDatetime}, when, "2024-03-01T12:30:00Z"},
		// options
		{"option in list", &InputField{Type: InputString, Options: []string{"dev", "prod"}}, "prod", "prod"},
		{"custom option allowed", &InputField{Type: InputString, Options: []string{"dev"}, AllowCustom: true}, "qa", "qa"},
		{"integer option compared as text", &InputField{Type: InputInteger, Options: []string{"1", "2"}}, 2, int64(2)},
		{"default checked against options", &InputField{Type: InputString, Options: []string{"dev"}, Default: "dev"}, nil, "dev"},
		// connections
		{"connection resolved", &InputField{Type: "postgres"}, "main-db",
			map[string]any{"name": "main-db", "host": "db.local", "password": "hunter2", "opts": map[string]any{"ssl": true}}},
		{"connection default resolved", &InputField{Type: "s3", Default: "backups"}, nil, map[string]any{"name": "backups", "bucket": "bk"}},
		{"connection resolved twice is the same", &InputField{Type: "s3"}, map[string]any{"name": "backups", "bucket": "stale"},
			map[string]any{"name": "backups", "bucket": "bk"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			given := map[string]any{}
			if tt.given != nil {
				given["f"] = tt.given
			}
			got, err := inputWorkspace().ResolveInput(fields("f", tt.field), given)
			if err != nil {
				t.Fatalf("ResolveInput: %v", err)
			}
			v, ok := got["f"]
			if !ok || !reflect.DeepEqual(v, tt.want) {
				t.Errorf("f = %#v (%T), want %#v (%T)", v, v, tt.want, tt.want)
			}
		})
	}
}

func TestResolveInputRejects(t *testing.T) {
	tests := []struct {
		name  string
		field *InputField
		given any
		want  string
	}{
		{"required missing", &InputField{Type: InputString, Required: true}, nil, `input "f": required`},
		{"required blank number", &InputField{Type: InputInteger, Required: true}, "", `input "f": required`},
		{"string from object", &InputField{Type: InputString}, map[string]any{}, `input "f": expected string, got an object`},
		{"integer from word", &InputField{Type: InputInteger}, "abc", `input "f": expected integer, got "abc"`},
		{"integer from fraction", &InputField{Type: InputInteger}, 2.5, `input "f": expected integer, got 2.5`},
		{"integer from fraction string", &InputField{Type: InputInteger}, "2.5", `input "f": expected integer, got "2.5"`},
		{"integer from bool", &InputField{Type: InputInteger}, true, `input "f": expected integer, got true`},
		{"integer too large for JSON", &InputField{Type: InputInteger}, 1e300, `input "f": expected integer`},
		{"number from word", &InputField{Type: InputNumber}, "many", `input "f": expected number, got "many"`},
		{"number NaN", &InputField{Type: InputNumber}, "NaN", `input "f": expected number, got "NaN"`},
		{"number from list", &InputField{Type: InputNumber}, []any{1}, `input "f": expected number, got a list`},
		{"boolean from yes", &InputField{Type: InputBoolean}, "yes", `input "f": expected boolean, got "yes"`},
		{"boolean from number", &InputField{Type: InputBoolean}, 1, `input "f": expected boolean, got 1`},
		{"date wrong format", &InputField{Type: InputDate}, "01/03/2024", `input "f": expected date (YYYY-MM-DD), got "01/03/2024"`},
		{"date impossible", &InputField{Type: InputDate}, "2023-02-29", `expected date`},
		{"date with time", &InputField{Type: InputDate}, "2024-03-01T10:00", `expected date`},
		{"datetime without time", &InputField{Type: InputDatetime}, "2024-03-01", `expected datetime`},
		{"datetime bad hour", &InputField{Type: InputDatetime}, "2024-03-01T25:00", `expected datetime`},
		{"datetime number", &InputField{Type: InputDatetime}, 5, `expected datetime`},
		{"option not in list", &InputField{Type: InputString, Options: []string{"dev", "prod"}}, "qa", `input "f": "qa" is not one of "dev", "prod"`},
		{"default outside options", &InputField{Type: InputString, Options: []string{"dev"}, Default: "qa"}, nil, `"qa" is not one of "dev"`},
		{"default with undefined secret", &InputField{Type: InputString, Default: "{{ secret.NOPE }}"}, nil, `input "f": default: template "{{ secret.NOPE }}": undefined variable "secret.NOPE"`},
		{"unknown connection", &InputField{Type: "postgres"}, "nope", `input "f": unknown connection "nope"`},
		{"connection of another type", &InputField{Type: "postgres"}, "backups", `input "f": connection "backups" is of type "s3", not "postgres"`},
		{"untyped connection", &InputField{Type: "postgres"}, "untyped", `connection "untyped" is of type "", not "postgres"`},
		{"connection by number", &InputField{Type: "postgres"}, 3, `input "f": expected the name of a postgres connection, got 3`},
		{"unknown type", &InputField{Type: "widget"}, "x", `input "f": unknown type "widget"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			given := map[string]any{}
			if tt.given != nil {
				given["f"] = tt.given
			}
			got, err := inputWorkspace().ResolveInput(fields("f", tt.field), given)
			if err == nil {
				t.Fatalf("ResolveInput = %#v, want an error", got)
			}
			if !errors.Is(err, ErrInvalidInput) {
				t.Errorf("error %v does not wrap ErrInvalidInput", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestResolveInputReportsEveryProblemInOrder(t *testing.T) {
	defs := fields(
		"name", &InputField{Type: InputString, Required: true},
		"count", &InputField{Type: InputInteger},
		"env", &InputField{Type: InputString, Options: []string{"dev"}},
	)
	// A field missing from Order still gets checked, after the ordered ones.
	defs.Fields["zone"] = &InputField{Type: InputString, Required: true}
	_, err := inputWorkspace().ResolveInput(defs, map[string]any{"count": "abc", "env": "qa"})
	want := `input "name": required; input "count": expected integer, got "abc"; input "env": "qa" is not one of "dev"; input "zone": required`
	if err == nil || err.Error() != want {
		t.Errorf("error =\n%v\nwant\n%s", err, want)
	}
	var ie *InputError
	if !errors.As(err, &ie) || len(ie.Problems) != 4 {
		t.Errorf("error is not an *InputError with 4 problems: %#v", err)
	}
}

func TestResolveInputPassesUnknownKeysThrough(t *testing.T) {
	given := map[string]any{"extra": []any{1}, "count": "3", "body": map[string]any{"a": 1}}
	got, err := inputWorkspace().ResolveInput(fields("count", &InputField{Type: InputInteger}), given)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"extra": []any{1}, "count": int64(3), "body": map[string]any{"a": 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	if given["count"] != "3" {
		t.Error("ResolveInput changed the given map")
	}
}

func TestCheckInputKeysNamesUnknownKeysAndTheDeclaredOnes(t *testing.T) {
	defs := fields("name", &InputField{Type: InputString}, "seconds", &InputField{Type: InputInteger})
	tests := []struct {
		name  string
		defs  *Inputs
		given map[string]any
		want  string // "" = accepted
	}{
		{"declared keys", defs, map[string]any{"name": "a", "seconds": 1}, ""},
		{"nothing given", defs, nil, ""},
		{"a typo", defs, map[string]any{"nmae": "a"}, `input "nmae": unknown (declared: name, seconds)`},
		{"each unknown key, sorted", defs, map[string]any{"z": 1, "name": "a", "b": 2},
			`input "b": unknown (declared: name, seconds); input "z": unknown (declared: name, seconds)`},
		{"no definitions", nil, map[string]any{"x": 1}, `input "x": unknown (declared: none)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckInputKeys(tt.defs, tt.given)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckInputKeys = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want || !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("CheckInputKeys = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestResolveInputWithoutDefinitionsCopiesGiven(t *testing.T) {
	ws := inputWorkspace()
	for _, given := range []map[string]any{nil, {"a": 1}} {
		got, err := ws.ResolveInput(nil, given)
		if err != nil || got == nil || len(got) != len(given) {
			t.Errorf("ResolveInput(nil, %v) = %#v, %v", given, got, err)
		}
		got["new"] = true
		if _, changed := given["new"]; changed {
			t.Error("result shares the given map")
		}
	}
}

func TestResolvedConnectionIsACopy(t *testing.T) {
	ws := inputWorkspace()
	conn, err := ws.ResolveInput(fields("db", &InputField{Type: "postgres"}), map[string]any{"db": "main-db"})
	if err != nil {
		t.Fatal(err)
	}
	conn["db"].(map[string]any)["opts"].(map[string]any)["ssl"] = false
	if ws.Connections["main-db"].Values["opts"].(map[string]any)["ssl"] != true {
		t.Error("changing a resolved connection changed the workspace's connection")
	}
}

func TestResolveInputWithoutTemplateSetStillRendersDefaults(t *testing.T) {
	ws := inputWorkspace()
	ws.Templates = nil
	got, err := ws.ResolveInput(fields("pw", &InputField{Type: InputString, Default: "{{ secret.DB_PASSWORD }}"}), nil)
	if err != nil || got["pw"] != "hunter2" {
		t.Errorf("got %#v, %v", got, err)
	}
}

func TestInputRefReadsOnlyOneInputsValue(t *testing.T) {
	cases := map[string]string{
		"{{ input.env }}": "env", "{{input.env_2}}": "env_2", "{{  input._x  }}": "_x",
		"{{ input.env | upper }}": "", "{{ input.a.b }}": "", "{{ input. }}": "", "{{ input.2x }}": "",
		"x {{ input.env }}": "", "{{ inputs.env }}": "", "{{ input.env }} ": "", "input.env": "",
	}
	for src, want := range cases {
		got, ok := InputRef(src)
		if got != want || ok != (want != "") {
			t.Errorf("InputRef(%q) = %q, %v; want %q", src, got, ok, want)
		}
	}
}
