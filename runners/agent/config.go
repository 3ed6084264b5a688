package agent

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Provider types.
const (
	TypeAnthropic = "anthropic"
	TypeOpenAI    = "openai"
)

// knownTypes lists the provider types, for error messages.
var knownTypes = []string{TypeAnthropic, TypeOpenAI}

// DefaultMaxTokens is the reply budget of a provider that sets none
// (Anthropic's API requires one).
const DefaultMaxTokens = 1024

// DefaultMaxRetries is how many times a transient error (429, 5xx, a
// connection error) is retried when max_retries is unset.
const DefaultMaxRetries = 2

// Config is the server config's agents section.
type Config struct {
	Providers map[string]ProviderConfig `yaml:"providers"`
}

// ProviderConfig is one provider: an API, a model and its defaults.
type ProviderConfig struct {
	Type        string   `yaml:"type"`         // anthropic or openai
	APIKey      string   `yaml:"api_key"`      // usually ${ENV}; never logged
	APIEndpoint string   `yaml:"api_endpoint"` // base URL; "" = the vendor's
	Model       string   `yaml:"model"`
	MaxTokens   *int     `yaml:"max_tokens"`
	Temperature *float64 `yaml:"temperature"`
	MaxRetries  *int     `yaml:"max_retries"`
}

// Configured reports whether the section defines any provider.
func (c Config) Configured() bool { return len(c.Providers) > 0 }

// IDs returns the provider ids in order.
func (c Config) IDs() []string {
	ids := make([]string, 0, len(c.Providers))
	for id := range c.Providers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Validate checks every provider; errors name the setting
// (agents.providers.<id>.<field>) and never quote an API key.
func (c Config) Validate() error {
	for _, id := range c.IDs() {
		p := c.Providers[id]
		at := "agents.providers." + id
		switch p.Type {
		case TypeAnthropic, TypeOpenAI:
		case "":
			return fmt.Errorf("%s.type: required (one of: %s)", at, strings.Join(knownTypes, ", "))
		default:
			return fmt.Errorf("%s.type: unknown type %q (known: %s)", at, p.Type, strings.Join(knownTypes, ", "))
		}
		if strings.TrimSpace(p.Model) == "" {
			return fmt.Errorf("%s.model: required", at)
		}
		if p.APIKey == "" && p.APIEndpoint == "" {
			return fmt.Errorf("%s.api_key: required unless api_endpoint is set (write api_key: ${ENV_VAR}; is the variable set?)", at)
		}
		if p.APIEndpoint != "" && !strings.HasPrefix(p.APIEndpoint, "http://") && !strings.HasPrefix(p.APIEndpoint, "https://") {
			return fmt.Errorf("%s.api_endpoint: %q is not an http(s) URL", at, p.APIEndpoint)
		}
		if p.MaxTokens != nil && *p.MaxTokens < 1 {
			return fmt.Errorf("%s.max_tokens: must be at least 1, got %d", at, *p.MaxTokens)
		}
		if p.Temperature != nil && (*p.Temperature < 0 || *p.Temperature > 2) {
			return fmt.Errorf("%s.temperature: must be between 0 and 2, got %v", at, *p.Temperature)
		}
		if p.MaxRetries != nil && (*p.MaxRetries < 0 || *p.MaxRetries > 10) {
			return fmt.Errorf("%s.max_retries: must be between 0 and 10, got %d", at, *p.MaxRetries)
		}
	}
	return nil
}

// Describe lists the providers for the server's start-up banner: id, type,
// model and endpoint, never the key.
func (c Config) Describe() string {
	if !c.Configured() {
		return "none (agent steps fail when run)"
	}
	parts := make([]string, 0, len(c.Providers))
	for _, id := range c.IDs() {
		p := c.Providers[id]
		d := fmt.Sprintf("%s (%s, %s", id, p.Type, p.Model)
		if p.APIEndpoint != "" {
			d += " at " + redactedURL(p.APIEndpoint)
		}
		parts = append(parts, d+")")
	}
	return strings.Join(parts, ", ")
}

// redactedURL is an endpoint as the banner may print it: a password in it
// (a proxy's credentials) shows as "xxxxx".
func redactedURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "(an endpoint that is no URL)"
	}
	return u.Redacted()
}
