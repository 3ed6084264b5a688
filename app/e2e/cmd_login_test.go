package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/app/cli"
	"github.com/appliance-sh/appliance/app/config"
)

// The login commands run as the real binary (stdin is fed like a user
// typing) against a real auth-on server; credentials live in a config dir
// of the test's own.

const loginWorkspace = `tasks:
  hello:
    flow:
      greet: {type: script, script: echo hello from the server}
  slow:
    flow:
      nap: {type: script, script: sleep 30}
`

// authServer is an auth-on server with in-process workers, and a config
// dir for the client commands.
type authServer struct {
	t      *testing.T
	url    string
	config string // XDG_CONFIG_HOME of the client commands
}

func startAuthServer(t *testing.T, tweak ...func(*config.Server)) *authServer {
	t.Helper()
	ws := t.TempDir()
	writeWorkspace(t, ws, loginWorkspace)
	cfg := testServerConfig(t, map[string]string{"main": ws}, 2, append([]func(*config.Server){withAuth}, tweak...)...)
	srv, err := startServer(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	s := &authServer{t: t, url: "http://" + srv.Addr(), config: t.TempDir()}
	token := loginToken(t, s.url, "first-password")
	waitUntil(t, "the in-process workers to register", func() bool {
		var list struct {
			Total int `json:"total"`
		}
		doAuth(t, "GET", s.url+"/api/workers", token, &list)
		return list.Total > 0
	})
	return s
}

// cli runs the binary with stdin and extra environment; APPLIANCE_TOKEN is
// unset unless env sets it.
func (s *authServer) cli(stdin string, env []string, args ...string) (int, string, string) {
	s.t.Helper()
	cmd := exec.Command(binary(s.t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "APPLIANCE_TOKEN=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+s.config, "APPLIANCE_SERVER="+s.url)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("run %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// ok runs a client command that must succeed and returns its stdout.
func (s *authServer) ok(args ...string) string {
	s.t.Helper()
	code, out, errOut := s.cli("", nil, args...)
	if code != 0 {
		s.t.Fatalf("appliance %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func (s *authServer) login() {
	s.t.Helper()
	code, out, errOut := s.cli("admin@example.com\nfirst-password\n", nil, "login")
	if code != 0 || !strings.Contains(out, "logged in to "+s.url+" as admin@example.com") {
		s.t.Fatalf("login: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func (s *authServer) credentialsPath() string {
	return filepath.Join(s.config, "appliance", "credentials.json")
}

// stored is the login stored for the server.
func (s *authServer) stored() (cli.StoredLogin, bool) {
	s.t.Helper()
	raw, err := os.ReadFile(s.credentialsPath())
	if err != nil {
		s.t.Fatal(err)
	}
	var f cli.CredentialsFile
	if err := json.Unmarshal(raw, &f); err != nil {
		s.t.Fatalf("credentials %s: %v", raw, err)
	}
	l, ok := f.Servers[s.url]
	return l, ok
}

// refreshStatus presents a refresh token to the server.
func (s *authServer) refreshStatus(token string) int {
	s.t.Helper()
	return do(s.t, "POST", s.url+"/api/auth/refresh", map[string]string{"refresh_token": token}, nil)
}

func TestLoginByPasswordLetsEveryClientCommandWorkAgainstAuth(t *testing.T) {
	s := startAuthServer(t)
	code, _, errOut := s.cli("", nil, "jobs")
	if code != 1 || !strings.Contains(errOut, `run "appliance login --server `+s.url+`"`) {
		t.Fatalf("jobs before login: exit %d, stderr %q; want a 401 that says to run appliance login", code, errOut)
	}
	code, _, errOut = s.cli("admin@example.com\nwrong-password\n", nil, "login")
	if code != 1 || !strings.Contains(errOut, "wrong email or password") {
		t.Fatalf("login with a wrong password: exit %d, stderr %q", code, errOut)
	}

	s.login()
	info, err := os.Stat(s.credentialsPath())
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v, want 0600", info.Mode().Perm())
	}
	if l, ok := s.stored(); !ok || l.AccessToken == "" || l.RefreshToken == "" || l.Email != "admin@example.com" {
		t.Fatalf("stored login %+v (found %v), want a token pair for admin@example.com", l, ok)
	}

	out := s.ok("run", "hello", "--follow")
	id := strings.SplitN(out, "\n", 2)[0]
	if !jobIDLine.MatchString(id) || !strings.Contains(out, "hello from the server") {
		t.Fatalf("run --follow:\n%s", out)
	}
	if out := s.ok("jobs"); !strings.Contains(out, id) {
		t.Errorf("jobs does not list %s:\n%s", id, out)
	}
	if out := s.ok("logs", id); !strings.Contains(out, "hello from the server") {
		t.Errorf("logs:\n%s", out)
	}
	if out := s.ok("tasks"); !strings.Contains(out, "hello") || !strings.Contains(out, "slow") {
		t.Errorf("tasks:\n%s", out)
	}
	if out := s.ok("workers"); strings.TrimSpace(out) == "" {
		t.Errorf("workers printed nothing")
	}
	out = s.ok("rerun", id, "--follow")
	if rerun := strings.SplitN(out, "\n", 2)[0]; !jobIDLine.MatchString(rerun) || rerun == id || !strings.Contains(out, "hello from the server") {
		t.Errorf("rerun --follow:\n%s", out)
	}
	slow := strings.TrimSpace(s.ok("run", "slow"))
	if out := s.ok("cancel", slow); !strings.Contains(out, "cancelled "+slow) {
		t.Errorf("cancel: %s", out)
	}
}

func TestLoginRefreshesAnExpiredAccessTokenAndRotates(t *testing.T) {
	s := startAuthServer(t, func(c *config.Server) { c.Auth.AccessTokenTTL = "1s" })
	s.login()
	before, _ := s.stored()
	exp, ok := cli.TokenExpiry(before.AccessToken)
	if !ok {
		t.Fatalf("stored access token %q has no expiry", before.AccessToken)
	}
	waitUntil(t, "the access token to expire", func() bool { return time.Now().After(exp) })
	if code := doAuth(t, "GET", s.url+"/api/jobs", before.AccessToken, &map[string]any{}); code != 401 {
		t.Fatalf("the expired access token still works: %d", code)
	}

	s.ok("jobs")
	after, _ := s.stored()
	if after.AccessToken == before.AccessToken || after.RefreshToken == before.RefreshToken || after.RefreshToken == "" {
		t.Fatalf("tokens were not renewed: before %+v, after %+v", before, after)
	}
	// The renewed login works until its own token expires, then renews
	// again: a run that follows its job across expiries still works.
	out := s.ok("run", "hello", "--follow")
	if !strings.Contains(out, "hello from the server") {
		t.Fatalf("run --follow after a refresh:\n%s", out)
	}
	// Commands that find the token expired at the same moment renew it
	// once between them: a second use of a rotated refresh token would
	// revoke the whole login.
	current, _ := s.stored()
	exp, _ = cli.TokenExpiry(current.AccessToken)
	waitUntil(t, "the renewed access token to expire", func() bool { return time.Now().After(exp) })
	codes := make(chan string, 3)
	for range 3 {
		go func() {
			code, _, errOut := s.cli("", nil, "jobs")
			codes <- fmt.Sprintf("exit %d %s", code, strings.TrimSpace(errOut))
		}()
	}
	for range 3 {
		if got := <-codes; got != "exit 0 " {
			t.Errorf("concurrent jobs after expiry: %s", got)
		}
	}
	s.ok("jobs")

	// A token the server refuses although it looks unexpired (a server
	// clock ahead of ours) is renewed on the 401.
	l, _ := s.stored()
	l.AccessToken = "refused"
	if err := (&cli.CredentialStore{Path: s.credentialsPath()}).Save(&cli.CredentialsFile{Servers: map[string]cli.StoredLogin{s.url: l}}); err != nil {
		t.Fatal(err)
	}
	s.ok("tasks")
	if l2, _ := s.stored(); l2.AccessToken == "refused" || l2.RefreshToken == l.RefreshToken {
		t.Fatalf("a refused access token was not renewed: %+v", l2)
	}

	// The old refresh token was rotated out: presenting it is refused.
	if code := s.refreshStatus(before.RefreshToken); code != 401 {
		t.Fatalf("the rotated refresh token answered %d, want 401", code)
	}
}

func TestLoginWithAnAPIKey(t *testing.T) {
	s := startAuthServer(t)
	token := loginToken(t, s.url, "first-password")
	var created wire.APIKeyCreated
	if code := doAuthBody(t, "POST", s.url+"/api/auth/api-keys", token, map[string]any{"name": "cli"}, &created); code != 201 && code != 200 {
		t.Fatalf("create api key: %d", code)
	}
	code, _, errOut := s.cli("", nil, "login", "--api-key", "appk_00000000000000000000000000000000")
	if code != 1 || !strings.Contains(errOut, "does not accept this API key") {
		t.Fatalf("login with an unknown key: exit %d, stderr %q", code, errOut)
	}
	// "-" reads the key from stdin, out of the shell's history.
	code, out, errOut := s.cli(created.Key+"\n", nil, "login", "--api-key", "-")
	if code != 0 || !strings.Contains(out, "as admin@example.com") {
		t.Fatalf("login --api-key: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if l, _ := s.stored(); l.APIKey != created.Key || l.AccessToken != "" {
		t.Fatalf("stored login %+v, want the API key only", l)
	}
	if out := s.ok("tasks"); !strings.Contains(out, "hello") {
		t.Errorf("tasks with the API key:\n%s", out)
	}
	if out := s.ok("logout"); !strings.Contains(out, "logged out of "+s.url) {
		t.Errorf("logout: %s", out)
	}
	if _, ok := s.stored(); ok {
		t.Fatal("the API key is still stored after logout")
	}
}

func TestLogoutRevokesTheLoginAndForgetsIt(t *testing.T) {
	s := startAuthServer(t)
	s.login()
	l, _ := s.stored()
	if out := s.ok("logout"); !strings.Contains(out, "logged out of "+s.url) {
		t.Fatalf("logout: %s", out)
	}
	if _, ok := s.stored(); ok {
		t.Fatal("the login is still stored after logout")
	}
	if code := s.refreshStatus(l.RefreshToken); code != 401 {
		t.Fatalf("the refresh token of the logged-out login answered %d, want 401", code)
	}
	if code, _, errOut := s.cli("", nil, "jobs"); code != 1 || !strings.Contains(errOut, "appliance login") {
		t.Fatalf("jobs after logout: exit %d, stderr %q", code, errOut)
	}
	if out := s.ok("logout"); !strings.Contains(out, "not logged in to "+s.url) {
		t.Fatalf("second logout: %s", out)
	}
}

func TestApplianceTokenWinsOverTheStoredLogin(t *testing.T) {
	s := startAuthServer(t)
	s.login()
	code, _, errOut := s.cli("", []string{"APPLIANCE_TOKEN=not-a-valid-token"}, "jobs")
	if code != 1 || !strings.Contains(errOut, "check APPLIANCE_TOKEN") {
		t.Fatalf("jobs with a bad APPLIANCE_TOKEN and a good stored login: exit %d, stderr %q; want the token used and refused", code, errOut)
	}
	// A valid token works with no stored login at all.
	s.ok("logout")
	token := loginToken(t, s.url, "first-password")
	if code, out, errOut := s.cli("", []string{"APPLIANCE_TOKEN=" + token}, "tasks"); code != 0 || !strings.Contains(out, "hello") {
		t.Fatalf("tasks with APPLIANCE_TOKEN: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// doAuthBody sends a JSON body with a bearer token.
func doAuthBody(t *testing.T, method, url, token string, body, out any) int {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: decode answer: %v", method, url, err)
	}
	return resp.StatusCode
}

func TestLoginToAServerWithoutAuthSaysSo(t *testing.T) {
	f := startFixture(t, nil, 0)
	s := &authServer{t: t, url: f.url, config: t.TempDir()}
	code, _, errOut := s.cli("someone@example.com\npassword\n", nil, "login")
	if code != 1 || !strings.Contains(errOut, "has no sign-in (auth is off)") {
		t.Fatalf("login to an auth-off server: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(s.credentialsPath()); !os.IsNotExist(err) {
		t.Fatalf("a failed login wrote credentials: %v", err)
	}
}

// TestLoginKeepsAndResendsTheDeviceCookie: `appliance login` keeps the
// device cookie the server sets in its credentials file, across logout,
// and sends it on later logins, so failures of a stranger that lock the
// account (from the same address, as behind a proxy) do not lock it out.
func TestLoginKeepsAndResendsTheDeviceCookie(t *testing.T) {
	s := startAuthServer(t)
	device := func() string {
		t.Helper()
		f, err := (&cli.CredentialStore{Path: s.credentialsPath()}).Load()
		if err != nil {
			t.Fatal(err)
		}
		return f.Device(s.url, "admin@example.com")
	}
	// lock spends the admin account's login budget with wrong passwords,
	// from this machine's address, as the CLI's.
	lock := func() {
		t.Helper()
		for range 50 {
			if do(t, "POST", s.url+"/api/auth/login", map[string]string{"email": "admin@example.com", "password": "wrong"}, nil) == http.StatusTooManyRequests {
				return
			}
		}
		t.Fatal("50 wrong passwords never hit the account's login limit")
	}

	s.login()
	first := device()
	if first == "" {
		t.Fatal("login stored no device cookie")
	}

	// A client without the cookie is locked out with the stranger.
	lock()
	other := &authServer{t: t, url: s.url, config: t.TempDir()}
	if code, _, errOut := other.cli("admin@example.com\nfirst-password\n", nil, "login"); code != 1 || !strings.Contains(errOut, "too many failed logins for this account") {
		t.Fatalf("login without a device cookie on a locked account: exit %d, stderr %q; want the account's 429", code, errOut)
	}
	// The CLI that signed in before sends its cookie and gets in; the
	// server renews the cookie and the file keeps the new one.
	lock()
	s.login()
	second := device()
	if second == "" || second == first {
		t.Fatalf("device cookie after a second login %q (first %q): want a renewed one", second, first)
	}

	// Logout forgets the login, not the device.
	s.ok("logout")
	if device() != second {
		t.Fatal("logout dropped the device cookie")
	}
	lock()
	s.login()
}
