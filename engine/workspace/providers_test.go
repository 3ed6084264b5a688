package workspace

import (
	"errors"
	"testing"

	"github.com/appliance-sh/appliance/engine/workflow"
)

func TestAgentProvidersAreCheckedOnlyWhenTheServerKnowsThem(t *testing.T) {
	dir := writeWorkspace(t, map[string]string{".workflows/main.yaml": dedent(`
		actions:
		  ask:
		    type: agent
		    provider: gpt
		    prompt: hi
		`)})
	cases := []struct {
		name      string
		providers []string
		want      string
	}{
		{"not checked", nil, ""},
		{"known", []string{"claude", "gpt"}, ""},
		{"unknown", []string{"claude", "local"}, `.workflows/main.yaml:4:15: actions.ask.provider: unknown agent provider "gpt" (the server config's agents.providers defines: claude, local)`},
		{"none defined", []string{}, `.workflows/main.yaml:4:15: actions.ask.provider: unknown agent provider "gpt" (the server config's agents.providers defines: none)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadWith("test", dir, map[string]string{}, LoadOptions{Providers: c.providers})
			if c.want == "" {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				return
			}
			var es workflow.Errors
			if !errors.As(err, &es) || len(es) != 1 || es[0].Error() != c.want {
				t.Fatalf("load error:\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}

func TestExamplesAgentActionLoadsWithoutProviders(t *testing.T) {
	ws, err := Load("examples", "../../examples", map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := ws.Actions["classify-ticket"]
	if !ok || a.Type != workflow.TypeAgent || a.Provider != "llm" || a.Output["category"] == nil {
		t.Fatalf("classify-ticket = %+v", a)
	}
	if _, err := LoadWith("examples", "../../examples", map[string]string{}, LoadOptions{Providers: []string{"claude"}}); err == nil {
		t.Fatal("the examples loaded on a server whose only provider is claude")
	}
}
