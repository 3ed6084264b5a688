package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/appliance-sh/appliance/api/client"
	"github.com/appliance-sh/appliance/api/wire"
)

func init() {
	Commands["login"] = cmdLogin
	Commands["logout"] = cmdLogout
}

// cmdLogin is `appliance login [--server URL] [--api-key KEY]`: it asks
// for email and password (the password without echo on a terminal; on a
// pipe both are read as lines) and stores the tokens for the server.
func cmdLogin(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("login", "appliance login [--server URL] [--api-key KEY|-]", stdout, stderr)
	apiKey := cc.fs.String("api-key", "", `store this API key instead of logging in with a password ("-" reads it from stdin)`)
	if _, code, ok := cc.parse(args, 0); !ok {
		return code
	}
	c, err := cc.anonymousClient()
	if err != nil {
		return cc.usageError("%v", err)
	}
	c = newAPIClient(c.BaseURL(), "") // APPLIANCE_TOKEN is not a login
	store, err := defaultCredentialStore()
	if err != nil {
		fmt.Fprintf(stderr, "appliance: %v\n", err)
		return 1
	}
	in := bufio.NewReader(os.Stdin)
	return cc.runWith(c, func(ctx context.Context, c *client.Client) (int, error) {
		var login *StoredLogin
		var err error
		device := ""
		if *apiKey != "" {
			login, err = loginWithAPIKey(ctx, c, in, *apiKey)
		} else {
			known, lerr := store.Load()
			if lerr != nil {
				return 1, lerr
			}
			login, device, err = loginWithPassword(ctx, c, in, stderr, func(email string) string { return known.Device(c.BaseURL(), email) })
		}
		if err != nil {
			return 1, err
		}
		err = store.edit(func(f *CredentialsFile) error {
			f.Servers[c.BaseURL()] = *login
			if device != "" {
				f.setDevice(c.BaseURL(), login.Email, device)
			}
			return nil
		})
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(stdout, "logged in to %s as %s\n", c.BaseURL(), login.Email)
		return 0, nil
	})
}

// loginWithPassword signs in with the device cookie device gives for the
// email, if any, and returns the login and the device cookie the server
// set ("" = none).
func loginWithPassword(ctx context.Context, c *client.Client, in *bufio.Reader, prompt io.Writer, device func(email string) string) (*StoredLogin, string, error) {
	fmt.Fprint(prompt, "Email: ")
	email, err := readLine(in)
	if err != nil {
		return nil, "", fmt.Errorf("read email: %w", err)
	}
	fmt.Fprint(prompt, "Password: ")
	var password string
	if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
		b, rerr := term.ReadPassword(fd)
		fmt.Fprintln(prompt)
		password, err = string(b), rerr
	} else {
		password, err = readLine(in)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read password: %w", err)
	}
	pair, next, err := c.Login(ctx, wire.LoginRequest{Email: email, Password: password}, device(email))
	switch status := answerStatus(err); {
	case status == http.StatusNotFound:
		return nil, "", fmt.Errorf("the server at %s has no sign-in (auth is off): client commands work without login", c.BaseURL())
	case status == http.StatusUnauthorized:
		return nil, "", errors.New("wrong email or password")
	case err != nil:
		return nil, "", err
	}
	return &StoredLogin{Email: email, AccessToken: pair.AccessToken, RefreshToken: pair.RefreshToken}, next, nil
}

// loginWithAPIKey checks the key with the server before storing it.
func loginWithAPIKey(ctx context.Context, c *client.Client, in *bufio.Reader, key string) (*StoredLogin, error) {
	if key == "-" {
		var err error
		if key, err = readLine(in); err != nil {
			return nil, fmt.Errorf("read the API key from stdin: %w", err)
		}
	}
	me, _, err := c.As(key).Me(ctx)
	switch status := answerStatus(err); {
	case status == http.StatusNotFound:
		return nil, fmt.Errorf("the server at %s has no sign-in (auth is off): client commands work without login", c.BaseURL())
	case status == http.StatusUnauthorized:
		return nil, errors.New("the server does not accept this API key")
	case err != nil:
		return nil, err
	}
	return &StoredLogin{Email: me.Email, APIKey: key}, nil
}

// answerStatus is the status of the server's error answer err is, or 0.
func answerStatus(err error) int {
	var ae *client.Error
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// readLine reads one line without its end; the last line may lack one.
func readLine(in *bufio.Reader) (string, error) {
	line, err := in.ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		if errors.Is(err, io.EOF) {
			return "", errors.New("no input")
		}
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// cmdLogout is `appliance logout [--server URL]`: it revokes the stored
// refresh token at the server and forgets the login. An API key is only
// forgotten (it may serve elsewhere; revoke it in the UI or the API).
func cmdLogout(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("logout", "appliance logout [--server URL]", stdout, stderr)
	if _, code, ok := cc.parse(args, 0); !ok {
		return code
	}
	c, err := cc.anonymousClient()
	if err != nil {
		return cc.usageError("%v", err)
	}
	store, err := defaultCredentialStore()
	if err != nil {
		fmt.Fprintf(stderr, "appliance: %v\n", err)
		return 1
	}
	return cc.runWith(c, func(ctx context.Context, c *client.Client) (int, error) {
		found := false
		var revokeErr error
		err := store.update(c.BaseURL(), func(cur StoredLogin, ok bool) (*StoredLogin, error) {
			found = ok
			if ok && cur.RefreshToken != "" {
				revokeErr = c.Logout(ctx, cur.RefreshToken)
			}
			return nil, nil
		})
		switch {
		case err != nil:
			return 1, err
		case !found:
			fmt.Fprintf(stdout, "not logged in to %s\n", c.BaseURL())
		case revokeErr != nil:
			// Forgotten here all the same; the server keeps the token
			// until it expires.
			return 1, fmt.Errorf("logged out locally, but the server did not revoke the login: %w", revokeErr)
		default:
			fmt.Fprintf(stdout, "logged out of %s\n", c.BaseURL())
		}
		return 0, nil
	})
}
