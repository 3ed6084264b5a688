package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// Time limits of the client's requests. Long-polls get their wait plus
// requestTimeout, so the client never gives up before the server answers.
const (
	requestTimeout  = 30 * time.Second
	claimWait       = 20 * time.Second
	downloadTimeout = 10 * time.Minute
)

// Client is the HTTP transport of the worker protocol, for remote workers.
type Client struct {
	// bases are the servers' addresses (replicas of one service), tried
	// in turn: cur is the one in use, left for the next on a connection
	// failure or a 503 (a replica that does not lead, and no leader yet).
	bases   []*url.URL
	cur     atomic.Int32
	baseErr error
	token   string
	http    *http.Client
	cache   *workspaceCache
	reports *reportBatcher
	// claimsCarryNoResults: the server refused a claim carrying results
	// (one that predates them), so results go on their own.
	claimsCarryNoResults atomic.Bool
	// Set by options, for the cache made once they are applied.
	cacheDir string
	limits   WorkspaceLimits

	mu sync.Mutex
	// secrets are the secrets of the workers registered through this
	// client (or remembered from a spool), by id; latest is the last
	// registered one's, for the calls that name no worker.
	secrets map[string]string
	latest  string
}

var _ Server = (*Client)(nil)

// ClientOption adjusts a Client.
type ClientOption func(*Client)

// WithWorkspaceCache sets where downloaded workspaces are kept (default
// <user cache dir>/appliance/workspaces).
func WithWorkspaceCache(dir string) ClientOption {
	return func(c *Client) { c.cacheDir = dir }
}

// WithWorkspaceLimits bounds what a downloaded workspace may unpack to;
// zero fields keep DefaultWorkspaceLimits.
func WithWorkspaceLimits(l WorkspaceLimits) ClientOption {
	return func(c *Client) { c.limits = l }
}

// WithServerURLs adds more addresses of the same service (the replicas of
// a pair, see ha in the README): a call that cannot reach one, or is
// answered 503, makes the next call go to the next.
func WithServerURLs(urls ...string) ClientOption {
	return func(c *Client) {
		for _, s := range urls {
			u, err := ParseServerURL(s)
			if err != nil {
				c.baseErr = err
				return
			}
			c.bases = append(c.bases, u)
		}
	}
}

// NewClient returns a client of the worker endpoints at serverURL,
// authenticating with the worker token. httpClient may be nil; its own
// Timeout is not used, as each request carries a deadline fitting its
// long-poll.
// A malformed serverURL makes every call fail; ParseServerURL checks one
// up front.
func NewClient(serverURL, token string, httpClient *http.Client, opts ...ClientOption) *Client {
	base, err := ParseServerURL(serverURL)
	hc := &http.Client{}
	if httpClient != nil {
		copied := *httpClient
		copied.Timeout = 0
		hc = &copied
	}
	c := &Client{bases: []*url.URL{base}, baseErr: err, token: token, http: hc, secrets: map[string]string{}}
	c.reports = &reportBatcher{c: c}
	for _, o := range opts {
		o(c)
	}
	if c.cacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		c.cacheDir = filepath.Join(dir, "appliance", "workspaces")
	}
	c.cache = newWorkspaceCache(c.cacheDir, c.limits, c.download)
	return c
}

// ParseServerURL checks a server address: http(s)://host[:port][/prefix].
func ParseServerURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server url %q: want http(s)://host[:port]", s)
	}
	return u, nil
}

// Register implements Server.
func (c *Client) Register(ctx context.Context, name string, tags []string) (string, error) {
	if tags == nil {
		tags = []string{}
	}
	var out workerproto.Registered
	err := c.call(ctx, "", "register", http.MethodPost, "/worker/register", nil, requestTimeout,
		workerproto.Register{Name: name, Tags: tags, WantSecret: true}, &out)
	if err != nil {
		return "", err
	}
	if out.WorkerID == "" {
		return "", errors.New("register: server answered without a worker_id")
	}
	if out.Secret == "" {
		return "", errors.New("register: server answered without a worker_secret: it is older than this worker; upgrade it")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.secrets[out.WorkerID], c.latest = out.Secret, out.Secret
	return out.WorkerID, nil
}

var _ Prover = (*Client)(nil)

// Secret implements Prover.
func (c *Client) Secret(workerID string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.secrets[workerID]
}

// Remember implements Prover.
func (c *Client) Remember(workerID, secret string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.secrets[workerID] = secret
}

// secretOf is what a call as workerID carries in workerproto.SecretHeader:
// that worker's secret, or the last registered one's for a call that
// names no worker ("").
func (c *Client) secretOf(workerID string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if workerID == "" {
		return c.latest
	}
	return c.secrets[workerID]
}

// Heartbeat implements Server.
func (c *Client) Heartbeat(ctx context.Context, workerID string, running []workerproto.StepRef) error {
	if running == nil {
		running = []workerproto.StepRef{}
	}
	return c.call(ctx, workerID, "heartbeat", http.MethodPost, "/worker/heartbeat", nil, requestTimeout,
		workerproto.Heartbeat{WorkerID: workerID, Running: running}, nil)
}

// Claim implements Server.
func (c *Client) Claim(ctx context.Context, workerID string, tags []string) (*workerproto.Assignment, error) {
	if tags == nil {
		tags = []string{}
	}
	q := url.Values{"wait": {strconv.Itoa(int(claimWait / time.Second))}}
	var a workerproto.Assignment
	err := c.call(ctx, workerID, "claim", http.MethodPost, "/worker/jobs/claim", q, claimWait+requestTimeout,
		workerproto.Claim{WorkerID: workerID, Tags: tags}, &a)
	if err != nil {
		return nil, err
	}
	if a.JobID == "" {
		return nil, nil
	}
	return &a, nil
}

var _ StepsClaimer = (*Client)(nil)

// ClaimSteps implements StepsClaimer. A claim carries the worker's
// results waiting to be sent, those held for it (see resultPairer) and
// those queued behind a report on its way: one request and one commit for
// the results and the claim, so a step a result makes ready may be among
// those claimed. Such a claim does not wait for work; when it brings none,
// a claim without results waits for it.
func (c *Client) ClaimSteps(ctx context.Context, workerID string, max int) ([]*workerproto.Assignment, error) {
	for {
		carried := c.reports.forClaim(workerID, !c.claimsCarryNoResults.Load())
		as, err := c.claimSteps(ctx, workerID, max, carried)
		if len(carried) == 0 {
			c.reports.polled()
		}
		if err != nil || len(as) > 0 || len(carried) == 0 || ctx.Err() != nil {
			return as, err
		}
	}
}

// claimCarrying implements resultPairer: one claim carrying the worker's
// queued results, none when there are none to carry.
func (c *Client) claimCarrying(ctx context.Context, workerID string, max int) ([]*workerproto.Assignment, error) {
	if c.claimsCarryNoResults.Load() {
		return nil, nil
	}
	carried := c.reports.toCarry(workerID)
	if len(carried) == 0 {
		return nil, nil
	}
	return c.claimSteps(ctx, workerID, max, carried)
}

// claimSteps sends one claim of up to max steps carrying the results
// carried, answers them, and returns the steps claimed.
func (c *Client) claimSteps(ctx context.Context, workerID string, max int, carried []*pendingReport) ([]*workerproto.Assignment, error) {
	req := workerproto.Claims{WorkerID: workerID, Max: max}
	for _, p := range carried {
		req.Results = append(req.Results, p.step)
	}
	var out workerproto.Assignments
	var err error
	if len(carried) == 0 {
		q := url.Values{"wait": {strconv.Itoa(int(claimWait / time.Second))}}
		err = c.call(ctx, workerID, "claim steps", http.MethodPost, "/worker/claims", q, claimWait+requestTimeout, req, &out)
	} else {
		// Not cut when the worker stops: the server may have recorded the
		// results, and the answer says so. Such a claim does not wait for
		// work.
		err = c.call(context.WithoutCancel(ctx), workerID, "claim steps", http.MethodPost, "/worker/claims", nil, requestTimeout, req, &out)
		if se := (*StatusError)(nil); errors.As(err, &se) && se.Status == http.StatusBadRequest {
			// A server that takes claims but not their results: they go
			// on their own from now on.
			c.claimsCarryNoResults.Store(true)
		}
		c.reports.settle(carried, out.Results, err)
	}
	if se := (*StatusError)(nil); errors.As(err, &se) && noRoute(se) {
		return nil, fmt.Errorf("%w: %w", ErrNoClaimsOfSeveral, err)
	}
	if err != nil {
		return nil, err
	}
	as := make([]*workerproto.Assignment, 0, len(out.Assignments))
	for i := range out.Assignments {
		if out.Assignments[i].JobID != "" {
			as = append(as, &out.Assignments[i])
		}
	}
	return as, nil
}

// Start implements Server.
func (c *Client) Start(ctx context.Context, workerID, jobID, step string) error {
	return c.call(ctx, workerID, "start step", http.MethodPost, stepPath(jobID, step, "start"), nil, requestTimeout,
		workerproto.WorkerRef{WorkerID: workerID}, nil)
}

// Complete implements Server: results due at once go in one request
// (see reportBatcher).
func (c *Client) Complete(ctx context.Context, workerID, jobID, step string, res workerproto.Result) error {
	res.WorkerID = workerID
	return c.reports.complete(ctx, workerID, jobID, step, res, nil)
}

var _ resultPairer = (*Client)(nil)

// completeHeld implements resultPairer.
func (c *Client) completeHeld(ctx context.Context, workerID, jobID, step string, res workerproto.Result, h *resultHold) error {
	res.WorkerID = workerID
	if c.claimsCarryNoResults.Load() {
		h.ready() // nothing to wait for: no claim carries it
		h = nil
	}
	return c.reports.complete(ctx, workerID, jobID, step, res, h)
}

// releaseHeld implements resultPairer.
func (c *Client) releaseHeld(h *resultHold) { c.reports.release(h) }

// holdNone implements resultPairer.
func (c *Client) holdNone() (resume func()) { return c.reports.holdNone() }

// polling implements resultPairer.
func (c *Client) polling() bool { return c.reports.polling() }

// StepToken implements Server.
func (c *Client) StepToken(ctx context.Context, workerID, jobID, step string) (string, error) {
	var out workerproto.StepToken
	err := c.call(ctx, workerID, "mint workspace token", http.MethodPost, stepPath(jobID, step, "workspace-token"), nil, requestTimeout,
		workerproto.WorkerRef{WorkerID: workerID}, &out)
	return out.Token, err
}

// PushLogs implements Server.
func (c *Client) PushLogs(ctx context.Context, jobID string, push workerproto.LogPush) (bool, error) {
	if push.Lines == nil {
		push.Lines = []workerproto.LogLine{}
	}
	var in any = push
	if body, ok := appendLogPush(make([]byte, 0, logPushSize(push)), push); ok {
		in = encodedJSON(body)
	}
	return c.sendPush(ctx, jobID, push.WorkerID, in)
}

// pushRaw implements rawPusher.
func (c *Client) pushRaw(ctx context.Context, jobID string, push workerproto.LogPush, lines []byte) (bool, error) {
	body := appendPushHead(make([]byte, 0, logPushSize(workerproto.LogPush{WorkerID: push.WorkerID, StepName: push.StepName, Run: push.Run})+len(lines)), push)
	return c.sendPush(ctx, jobID, push.WorkerID, encodedJSON(append(append(body, lines...), "]}"...)))
}

// sendPush sends a push's body and tells whether the job was cancelled.
func (c *Client) sendPush(ctx context.Context, jobID, workerID string, body any) (bool, error) {
	var out workerproto.Pushed
	err := c.call(ctx, workerID, "push logs", http.MethodPost, "/worker/jobs/"+url.PathEscape(jobID)+"/logs", nil, requestTimeout,
		body, &out)
	return out.Cancelled, err
}

// Cancelled implements Server.
func (c *Client) Cancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error) {
	q := url.Values{"wait": {strconv.Itoa(int(wait.Round(time.Second) / time.Second))}}
	var out workerproto.Cancelled
	err := c.call(ctx, "", "poll cancellation", http.MethodGet, "/worker/jobs/"+url.PathEscape(jobID)+"/cancelled", q,
		wait+requestTimeout, nil, &out)
	return out.Cancelled, err
}

// Workspace implements Server: the workspace's files at revision, from the
// local cache or downloaded into it.
func (c *Client) Workspace(ctx context.Context, workspace, revision string) (string, error) {
	return c.cache.get(ctx, workspace, revision)
}

func stepPath(jobID, step, verb string) string {
	return "/worker/jobs/" + url.PathEscape(jobID) + "/steps/" + url.PathEscape(step) + "/" + verb
}

// call sends one JSON request as workerID (see secretOf) and decodes the
// JSON answer into out (if not nil).
func (c *Client) call(ctx context.Context, workerID, op, method, path string, q url.Values, timeout time.Duration, in, out any) error {
	if c.baseErr != nil {
		return fmt.Errorf("%s: %w", op, c.baseErr)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if raw, ok := in.(encodedJSON); ok {
		body = bytes.NewReader(raw)
	} else if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: encode request: %w", op, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.do(req, workerID)
	if err != nil {
		c.failedOver(req)
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		c.failedOver(req)
	}
	if resp.StatusCode/100 != 2 {
		return statusError(op, path, resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s: decode answer: %w", op, err)
	}
	return nil
}

func (c *Client) url(path string, q url.Values) string {
	base := c.bases[int(c.cur.Load())%len(c.bases)]
	u := *base
	// RawPath keeps escaped segments (step names like "build[0]") intact.
	u.RawPath = base.EscapedPath() + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = q.Encode()
	return u.String()
}

// failedOver moves on to the next server address after req's failed,
// unless another call moved on already.
func (c *Client) failedOver(req *http.Request) {
	if len(c.bases) < 2 {
		return
	}
	cur := c.cur.Load()
	if b := c.bases[int(cur)%len(c.bases)]; b.Host != req.URL.Host {
		return
	}
	c.cur.CompareAndSwap(cur, (cur+1)%int32(len(c.bases)))
}

// do sends req with the worker token and, once registered, the secret of
// workerID (see secretOf): every call carries it, those that name no
// worker too.
func (c *Client) do(req *http.Request, workerID string) (*http.Response, error) {
	req.Header.Set("Authorization", "Bearer "+c.token)
	if secret := c.secretOf(workerID); secret != "" {
		req.Header.Set(workerproto.SecretHeader, secret)
	}
	req.Header.Set("User-Agent", "appliance-worker")
	return c.http.Do(req)
}

// statusError reads a non-2xx answer into a StatusError whose sentinel says
// what the status means for the operation.
func statusError(op, path string, resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &body) == nil && body.Error != "" {
		msg = body.Error
	}
	return newStatusError(op, path, resp.StatusCode, msg)
}

// newStatusError is the StatusError of a status answering op on path,
// with the sentinel the status means for it.
func newStatusError(op, path string, status int, msg string) *StatusError {
	e := &StatusError{Op: op, Status: status, Message: msg}
	switch status {
	case http.StatusBadRequest:
		e.sentinel = ErrInvalid
	case http.StatusUnauthorized:
		e.sentinel = ErrUnauthorized
	case http.StatusForbidden:
		e.sentinel = ErrForbidden
	case http.StatusConflict:
		e.sentinel = ErrConflict
	case http.StatusNotFound:
		// The worker id is all a heartbeat or claim names; elsewhere a 404
		// may be the job, step or workspace.
		if strings.HasSuffix(path, "/heartbeat") || strings.HasSuffix(path, "/claim") || strings.HasSuffix(path, "/claims") {
			e.sentinel = ErrUnknownWorker
		} else {
			e.sentinel = ErrNotFound
		}
	}
	return e
}
