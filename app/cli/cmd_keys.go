package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/appliance-sh/appliance/api/client"
	"github.com/appliance-sh/appliance/api/wire"
)

func init() { Commands["keys"] = cmdKeys }

// scopeFlags collects repeated --scope values.
type scopeFlags []string

func (s *scopeFlags) String() string     { return strings.Join(*s, ",") }
func (s *scopeFlags) Set(v string) error { *s = append(*s, v); return nil }

var _ flag.Value = (*scopeFlags)(nil)

// cmdKeys is `appliance keys create NAME [--scope S]... [--expires-in-days
// N]` and `appliance keys list`. A key is created with the stored login
// (an API key cannot create keys); with no --scope it may do all its user
// may.
func cmdKeys(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "create" && args[0] != "list") {
		fmt.Fprintln(stderr, "usage: appliance keys create NAME [--scope read|run|approve|admin]... [--expires-in-days N]\n       appliance keys list")
		return 2
	}
	if args[0] == "list" {
		cc := newClientCommand("keys list", "appliance keys list", stdout, stderr)
		if _, code, ok := cc.parse(args[1:], 0); !ok {
			return code
		}
		return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
			keys, raw, err := c.APIKeys(ctx)
			if err != nil {
				return 1, err
			}
			if *cc.json {
				cc.printJSON(raw)
				return 0, nil
			}
			for _, k := range keys {
				fmt.Fprintf(stdout, "%s  %-20s  scopes: %s\n", k.Prefix, k.Name, strings.Join(k.Scopes, ","))
			}
			return 0, nil
		})
	}
	cc := newClientCommand("keys create", "appliance keys create NAME [--scope S]... [--expires-in-days N]", stdout, stderr)
	var scopes scopeFlags
	cc.fs.Var(&scopes, "scope", "a scope of the key: read, run, approve or admin (repeat for several; none = every scope)")
	days := cc.fs.Int("expires-in-days", 0, "days until the key expires (0 = never)")
	pos, code, ok := cc.parse(args[1:], 1)
	if !ok {
		return code
	}
	req := wire.CreateAPIKeyRequest{Name: pos[0], Scopes: scopes}
	if *days > 0 {
		req.ExpiresInDays = days
	}
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		created, raw, err := c.CreateAPIKey(ctx, req)
		if err != nil {
			return 1, err
		}
		if *cc.json {
			cc.printJSON(raw)
			return 0, nil
		}
		fmt.Fprintf(stdout, "%s\n", created.Key)
		fmt.Fprintf(stderr, "key %s (%s), scopes %s: shown this once, keep it safe\n", created.Prefix, created.Name, strings.Join(created.Scopes, ","))
		return 0, nil
	})
}
