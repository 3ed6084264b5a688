package config

import (
	"strings"
	"testing"
)

func TestServerConfigAgents(t *testing.T) {
	t.Setenv("APPLIANCE_TEST_LLM_KEY", testAPIKey)
	cases := []struct {
		name, yaml, wantErr string
		check               func(*Server) bool
	}{
		{name: "providers", yaml: `agents:
  providers:
    claude:
      type: anthropic
      api_key: ${APPLIANCE_TEST_LLM_KEY}
      model: claude-sonnet-4-5
      max_tokens: 2048
      temperature: 0.2
      max_retries: 3
    local:
      type: openai
      api_endpoint: http://127.0.0.1:11434/v1/
      model: llama3.1
`, check: func(c *Server) bool {
			p := c.Agents.Providers["claude"]
			l := c.Agents.Providers["local"]
			return p.APIKey == testAPIKey && p.Model == "claude-sonnet-4-5" && *p.MaxTokens == 2048 && *p.Temperature == 0.2 &&
				*p.MaxRetries == 3 && l.APIKey == "" && l.APIEndpoint == "http://127.0.0.1:11434/v1/" &&
				strings.Join(c.Agents.IDs(), ",") == "claude,local"
		}},
		{name: "none", yaml: "listen: x\n", check: func(c *Server) bool { return !c.Agents.Configured() }},
		{name: "unknown type", yaml: "agents: {providers: {x: {type: gemini, model: m, api_key: k}}}\n",
			wantErr: `agents.providers.x.type: unknown type "gemini" (known: anthropic, openai)`},
		{name: "no type", yaml: "agents: {providers: {x: {model: m, api_key: k}}}\n",
			wantErr: `agents.providers.x.type: required (one of: anthropic, openai)`},
		{name: "no model", yaml: "agents: {providers: {x: {type: openai, api_key: k}}}\n",
			wantErr: `agents.providers.x.model: required`},
		{name: "no key", yaml: "agents: {providers: {x: {type: anthropic, model: m, api_key: ${APPLIANCE_TEST_UNSET_KEY:-}}}}\n",
			wantErr: `agents.providers.x.api_key: required unless api_endpoint is set`},
		{name: "bad endpoint", yaml: "agents: {providers: {x: {type: openai, model: m, api_endpoint: localhost:11434}}}\n",
			wantErr: `agents.providers.x.api_endpoint: "localhost:11434" is not an http(s) URL`},
		{name: "temperature", yaml: "agents: {providers: {x: {type: openai, model: m, api_key: k, temperature: 3}}}\n",
			wantErr: `agents.providers.x.temperature: must be between 0 and 2, got 3`},
		{name: "max_tokens", yaml: "agents: {providers: {x: {type: openai, model: m, api_key: k, max_tokens: 0}}}\n",
			wantErr: `agents.providers.x.max_tokens: must be at least 1, got 0`},
		{name: "max_retries", yaml: "agents: {providers: {x: {type: openai, model: m, api_key: k, max_retries: -1}}}\n",
			wantErr: `agents.providers.x.max_retries: must be between 0 and 10, got -1`},
		{name: "unknown field", yaml: "agents: {providers: {x: {type: openai, model: m, api_key: k, key: v}}}\n", wantErr: ":1:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfigText(t, c.yaml)
			if err != nil && strings.Contains(err.Error(), testAPIKey) {
				t.Fatalf("the error quotes the key: %v", err)
			}
			if configErrorChecked(t, err, c.wantErr) {
				return
			}
			if !c.check(cfg) {
				t.Fatalf("config %+v", cfg.Agents)
			}
			if strings.Contains(cfg.Agents.Describe(), testAPIKey) {
				t.Fatalf("the banner shows the key: %s", cfg.Agents.Describe())
			}
		})
	}
}

// testAPIKey is a provider key the tests look for in errors and banners.
const testAPIKey = "sk-test-7f3a9c1e5b2d4f6a8c0e"
