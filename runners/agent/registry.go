package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/appliance-sh/appliance/engine"
)

// Registry holds the configured providers by id; it is the engine's
// AgentCaller.
type Registry struct {
	ids       []string
	providers map[string]*provider
}

// provider is one configured provider and its client.
type provider struct {
	id   string
	cfg  ProviderConfig
	call func(ctx context.Context, req engine.AgentRequest) (engine.AgentReply, error)
}

// New builds the clients of cfg's providers (validated first). client
// carries their HTTP requests (nil = a default client); the call's context
// bounds each request, so it sets no timeout of its own.
func New(cfg Config, client *http.Client) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if client == nil {
		client = &http.Client{}
	}
	r := &Registry{ids: cfg.IDs(), providers: map[string]*provider{}}
	for id, pc := range cfg.Providers {
		p := &provider{id: id, cfg: pc}
		switch pc.Type {
		case TypeAnthropic:
			p.call = newAnthropic(pc, client)
		case TypeOpenAI:
			p.call = newOpenAI(pc, client)
		}
		r.providers[id] = p
	}
	return r, nil
}

// IDs returns the configured provider ids in order.
func (r *Registry) IDs() []string { return append([]string(nil), r.ids...) }

// Call sends req to its provider, retrying transient errors (429, 5xx, a
// connection error) max_retries times with backoff, honouring
// Retry-After. The error never quotes the provider's API key.
func (r *Registry) Call(ctx context.Context, req engine.AgentRequest) (engine.AgentReply, error) {
	p, ok := r.providers[req.Provider]
	if !ok {
		if len(r.ids) == 0 {
			return engine.AgentReply{}, fmt.Errorf("provider %q is not configured: %w", req.Provider, engine.ErrNoAgents)
		}
		return engine.AgentReply{}, fmt.Errorf("provider %q is not configured (the server config's agents.providers defines: %s)",
			req.Provider, strings.Join(r.ids, ", "))
	}
	if req.Model == "" {
		req.Model = p.cfg.Model
	}
	if req.MaxTokens == nil {
		req.MaxTokens = p.cfg.MaxTokens
	}
	if req.Temperature == nil {
		req.Temperature = p.cfg.Temperature
	}
	reply, err := p.call(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return engine.AgentReply{}, ctx.Err()
		}
		return engine.AgentReply{}, p.redact(fmt.Errorf("provider %q (%s, model %s): %w", p.id, p.cfg.Type, req.Model, err))
	}
	if reply.Model == "" {
		reply.Model = req.Model
	}
	return reply, nil
}

// redact drops the API key from an error's text: a provider or a proxy
// may echo a request's credentials in its answer.
func (p *provider) redact(err error) error {
	key := p.cfg.APIKey
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), key, "[api_key]"))
}

// maxRetries is the provider's retry budget.
func maxRetries(pc ProviderConfig) int {
	if pc.MaxRetries != nil {
		return *pc.MaxRetries
	}
	return DefaultMaxRetries
}

// apiError is an HTTP error answer: its status and the API's message.
func apiError(status int, message string) error {
	msg := fmt.Sprintf("%d %s", status, http.StatusText(status))
	if message = strings.TrimSpace(message); message != "" {
		msg += ": " + message
	}
	return errors.New(msg)
}
