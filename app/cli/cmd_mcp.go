package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appliance-sh/appliance/api/client"
)

func init() { Commands["mcp"] = cmdMCP }

// cmdMCP is `appliance mcp [--server URL]`: an MCP server on stdin and
// stdout for desktop assistants, which forwards everything to the running
// server's /mcp with the stored login or APPLIANCE_TOKEN. It implements
// no tool: it lists the server's tools, prompts and resource templates
// (those the credential's scopes allow) with the SDK's client and
// announces them as its own, each call passed on as it came, progress
// notifications passed back.
func cmdMCP(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("mcp", "appliance mcp [--server URL]", stdout, stderr)
	if _, code, ok := cc.parse(args, 0); !ok {
		return code
	}
	c, err := cc.anonymousClient()
	if err != nil {
		return cc.usageError("%v", err)
	}
	if c, err = useStoredLogin(c); err != nil {
		fmt.Fprintf(stderr, "appliance mcp: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var t mcp.Transport = &mcp.StdioTransport{}
	if stdout != os.Stdout {
		t = &mcp.IOTransport{Reader: os.Stdin, Writer: nopCloser{stdout}}
	}
	if err := bridgeMCP(ctx, c, t); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "appliance mcp: %v\n", err)
		return 1
	}
	return 0
}

// tokenTransport sends the client's current token on each request.
type tokenTransport struct{ c *client.Client }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if token := t.c.Bearer(r.Context()); token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// progressRoutes remembers which local session asked for the progress of
// a call, by its token, to pass the server's notifications back.
type progressRoutes struct{ m sync.Map }

func (p *progressRoutes) key(token any) string { return fmt.Sprintf("%T:%v", token, token) }

// progressRoute is one call's entry in progressRoutes.
type progressRoute struct{ session *mcp.ServerSession }

// progressLinger keeps a call's route after its answer: the SDK hands a
// notification to its handler from a queue, after the answer that
// followed it on the wire may have returned, and the server's last
// notification (a job's end) comes just before the answer.
const progressLinger = 5 * time.Second

// route sends the progress notifications of token to ss until a while
// after the call ends (end).
func (p *progressRoutes) route(token any, ss *mcp.ServerSession) (end func()) {
	key, r := p.key(token), &progressRoute{session: ss}
	p.m.Store(key, r)
	// A later call reusing the token keeps its own route.
	return func() { time.AfterFunc(progressLinger, func() { p.m.CompareAndDelete(key, r) }) }
}

// bridgeMCP serves MCP on t (the SDK's stdio transport), forwarding to
// the server of c.
func bridgeMCP(ctx context.Context, c *client.Client, t mcp.Transport) error {
	routes := &progressRoutes{}
	remote := mcp.NewClient(&mcp.Implementation{Name: "appliance-mcp-bridge", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			if r, ok := routes.m.Load(routes.key(req.Params.ProgressToken)); ok {
				_ = r.(*progressRoute).session.NotifyProgress(ctx, req.Params)
			}
		},
	})
	endpoint := strings.TrimRight(c.BaseURL(), "/") + "/mcp"
	rs, err := remote.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: tokenTransport{c}}, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return fmt.Errorf("connect to %s: %w (%s)", endpoint, err, c.LoginHint())
	}
	defer rs.Close()

	info := rs.InitializeResult()
	local := mcp.NewServer(&mcp.Implementation{Name: "appliance", Version: info.ServerInfo.Version}, &mcp.ServerOptions{
		Instructions: info.Instructions, Capabilities: &mcp.ServerCapabilities{},
	})
	tools, err := rs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the server's tools: %w", err)
	}
	for _, tool := range tools.Tools {
		local.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			params := &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments}
			if token := req.Params.GetProgressToken(); token != nil {
				params.SetProgressToken(token)
				defer routes.route(token, req.Session)()
			}
			return rs.CallTool(ctx, params)
		})
	}
	if prompts, err := rs.ListPrompts(ctx, nil); err == nil {
		for _, p := range prompts.Prompts {
			local.AddPrompt(p, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return rs.GetPrompt(ctx, req.Params)
			})
		}
	}
	if templates, err := rs.ListResourceTemplates(ctx, nil); err == nil {
		for _, t := range templates.ResourceTemplates {
			local.AddResourceTemplate(t, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return rs.ReadResource(ctx, req.Params)
			})
		}
	}
	return local.Run(ctx, t)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
