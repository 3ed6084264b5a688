package agent

import (
	"context"
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/appliance-sh/appliance/engine"
)

// openAIURL is the OpenAI API's base URL.
const openAIURL = "https://api.openai.com/v1/"

// newOpenAI returns a call through the official SDK's Chat Completions
// API, which any OpenAI-compatible server speaks at its api_endpoint. The
// client is built from pc alone: no OPENAI_* variable of the server's
// environment is read. With an output schema the request asks for it
// natively too (response_format json_schema, not strict: optional fields
// stay optional).
func newOpenAI(pc ProviderConfig, client *http.Client) func(context.Context, engine.AgentRequest) (engine.AgentReply, error) {
	base := pc.APIEndpoint
	if base == "" {
		base = openAIURL
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(client),
		option.WithBaseURL(base),
		option.WithMaxRetries(maxRetries(pc)),
	}
	if pc.APIKey != "" {
		opts = append(opts, option.WithAPIKey(pc.APIKey))
	}
	svc := openai.NewChatCompletionService(opts...)
	compatible := pc.APIEndpoint != ""
	return func(ctx context.Context, req engine.AgentRequest) (engine.AgentReply, error) {
		var msgs []openai.ChatCompletionMessageParamUnion
		if req.System != "" {
			msgs = append(msgs, openai.SystemMessage(req.System))
		}
		msgs = append(msgs, openai.UserMessage(req.Prompt))
		params := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model), Messages: msgs}
		if req.MaxTokens != nil {
			// OpenAI's own API wants max_completion_tokens; compatible
			// servers know max_tokens.
			if compatible {
				params.MaxTokens = openai.Int(int64(*req.MaxTokens))
			} else {
				params.MaxCompletionTokens = openai.Int(int64(*req.MaxTokens))
			}
		}
		if req.Temperature != nil {
			params.Temperature = openai.Float(*req.Temperature)
		}
		if req.Schema != nil {
			params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
				OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
					JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
						Name:   "output",
						Schema: req.Schema,
						Strict: openai.Bool(false),
					},
				},
			}
		}
		res, err := svc.New(ctx, params)
		if err != nil {
			var oerr *openai.Error
			if errors.As(err, &oerr) {
				return engine.AgentReply{}, apiError(oerr.StatusCode, oerr.Message)
			}
			return engine.AgentReply{}, err
		}
		if len(res.Choices) == 0 {
			return engine.AgentReply{}, errors.New("the answer has no choices")
		}
		return engine.AgentReply{
			Text:         res.Choices[0].Message.Content,
			Model:        res.Model,
			InputTokens:  res.Usage.PromptTokens,
			OutputTokens: res.Usage.CompletionTokens,
		}, nil
	}
}
