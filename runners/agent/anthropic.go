package agent

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/appliance-sh/appliance/engine"
)

// anthropicURL is the Anthropic API's base URL.
const anthropicURL = "https://api.anthropic.com/"

// newAnthropic returns a call through the official SDK's Messages API. The
// client is built from pc alone: no ANTHROPIC_* variable of the server's
// environment is read. The output schema travels in the system prompt
// (the API's native structured output depends on the model).
func newAnthropic(pc ProviderConfig, client *http.Client) func(context.Context, engine.AgentRequest) (engine.AgentReply, error) {
	base := pc.APIEndpoint
	if base == "" {
		base = anthropicURL
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(client),
		option.WithBaseURL(base),
		option.WithMaxRetries(maxRetries(pc)),
	}
	if pc.APIKey != "" {
		opts = append(opts, option.WithAPIKey(pc.APIKey))
	}
	svc := anthropic.NewMessageService(opts...)
	return func(ctx context.Context, req engine.AgentRequest) (engine.AgentReply, error) {
		maxTokens := DefaultMaxTokens
		if req.MaxTokens != nil {
			maxTokens = *req.MaxTokens
		}
		params := anthropic.MessageNewParams{
			Model:     anthropic.Model(req.Model),
			MaxTokens: int64(maxTokens),
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(req.Prompt))},
		}
		if req.System != "" {
			params.System = []anthropic.TextBlockParam{{Text: req.System}}
		}
		var reqOpts []option.RequestOption
		if req.Temperature != nil {
			// This SDK version's params have no temperature field; the
			// Messages API still takes it.
			reqOpts = append(reqOpts, option.WithJSONSet("temperature", *req.Temperature))
		}
		msg, err := svc.New(ctx, params, reqOpts...)
		if err != nil {
			var aerr *anthropic.Error
			if errors.As(err, &aerr) {
				return engine.AgentReply{}, apiError(aerr.StatusCode, aerr.Message)
			}
			return engine.AgentReply{}, err
		}
		var text strings.Builder
		for _, b := range msg.Content {
			if b.Type == "text" {
				text.WriteString(b.Text)
			}
		}
		return engine.AgentReply{
			Text:         text.String(),
			Model:        string(msg.Model),
			InputTokens:  msg.Usage.InputTokens,
			OutputTokens: msg.Usage.OutputTokens,
		}, nil
	}
}
