package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/appliance-sh/appliance/api/client"
)

// clientCommand is what the client commands share: their flags, the
// parsing of interleaved flags and arguments, and how failures become
// messages and exit codes.
type clientCommand struct {
	name     string
	synopsis string
	fs       *flag.FlagSet
	server   *string
	json     *bool
	stdout   io.Writer
	stderr   io.Writer
}

// newClientCommand starts a command with the flags every client command
// takes; the caller adds its own before calling parse.
func newClientCommand(name, synopsis string, stdout, stderr io.Writer) *clientCommand {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cc := &clientCommand{name: name, synopsis: synopsis, fs: fs, stdout: stdout, stderr: stderr}
	server := os.Getenv("APPLIANCE_SERVER")
	if server == "" {
		server = defaultServerURL
	}
	cc.server = fs.String("server", server, "server URL (the default comes from $APPLIANCE_SERVER when set)")
	cc.json = fs.Bool("json", false, "print the server's raw JSON answer")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return cc
}

// parse reads flags wherever they stand among the arguments (`logs ID
// --follow` as well as `logs --follow ID`) and returns the positional
// arguments. want is how many there must be. ok is false when the command
// must stop: code is then its exit code (2 for a usage error, 0 for -h).
func (cc *clientCommand) parse(args []string, want int) (pos []string, code int, ok bool) {
	pos, err := parseInterleaved(cc.fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, 0, false
	}
	if err != nil {
		// The flag package has printed the error and the usage.
		return nil, 2, false
	}
	if len(pos) != want {
		switch {
		case want == 0:
			return nil, cc.usageError("unexpected argument %q", pos[0]), false
		case len(pos) < want:
			return nil, cc.usageError("missing argument"), false
		default:
			return nil, cc.usageError("unexpected argument %q", pos[want]), false
		}
	}
	return pos, 0, true
}

// usageError prints a usage mistake and the command's usage; it returns 2.
func (cc *clientCommand) usageError(format string, args ...any) int {
	fmt.Fprintf(cc.stderr, "appliance %s: %s\n", cc.name, fmt.Sprintf(format, args...))
	cc.fs.Usage()
	return 2
}

// parseInterleaved parses flags that may follow positional arguments; the
// standard flag package stops at the first of those. After "--" every
// argument is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// useStoredLogin is c with the login stored for its server, unless
// APPLIANCE_TOKEN is set (it wins).
func useStoredLogin(c *client.Client) (*client.Client, error) {
	if c.Token() != "" {
		return c, nil
	}
	store, err := defaultCredentialStore()
	if err != nil {
		return nil, err
	}
	f, err := store.Load()
	if err != nil {
		return nil, err
	}
	login, ok := f.Servers[c.BaseURL()]
	if !ok {
		return c, nil
	}
	s := &session{store: store, server: c.BaseURL(), login: login}
	s.c = client.New(c.BaseURL(), client.WithCredentials(s), client.WithLoginHint(loginHint(c.BaseURL(), "")))
	return s.c, nil
}

// serverURL is --server as a URL.
func (cc *clientCommand) serverURL() (string, error) {
	base := *cc.server
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--server %q is not an http(s) URL like %s", *cc.server, defaultServerURL)
	}
	return base, nil
}

// anonymousClient is the API client for --server with APPLIANCE_TOKEN and
// no stored login.
func (cc *clientCommand) anonymousClient() (*client.Client, error) {
	base, err := cc.serverURL()
	if err != nil {
		return nil, err
	}
	return newAPIClient(base, os.Getenv("APPLIANCE_TOKEN")), nil
}

// run calls body with a context that ends on SIGINT/SIGTERM and turns its
// error into a message on stderr and exit code 1.
func (cc *clientCommand) run(body func(ctx context.Context, c *client.Client) (int, error)) int {
	c, err := cc.anonymousClient()
	if err != nil {
		return cc.usageError("%v", err)
	}
	c, err = useStoredLogin(c)
	if err != nil {
		fmt.Fprintf(cc.stderr, "appliance: %v\n", err)
		return 1
	}
	return cc.runWith(c, body)
}

// runWith is run with the given client.
func (cc *clientCommand) runWith(c *client.Client, body func(ctx context.Context, c *client.Client) (int, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := body(ctx, c)
	if err != nil && ctx.Err() != nil {
		// Interrupted: the user knows why it stopped; 130 is the shell's
		// code for SIGINT.
		fmt.Fprintln(cc.stderr, "appliance: interrupted")
		return 130
	}
	if err != nil {
		fmt.Fprintf(cc.stderr, "appliance: %v\n", err)
		return 1
	}
	return code
}

// printJSON writes a raw answer on its own line.
func (cc *clientCommand) printJSON(raw []byte) {
	fmt.Fprintln(cc.stdout, strings.TrimRight(string(raw), "\n"))
}
