// Package failover_test runs two `appliance serve` replicas, built from the
// tree, on one real PostgreSQL database and breaks the leader: kill -9,
// SIGSTOP. It checks the promises of the README's "High availability".
package failover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The pair's lease is short so that a failover takes seconds.
const (
	lease = 2 * time.Second
	renew = 500 * time.Millisecond
)

// buildBinary compiles the appliance binary once per test run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "appliance-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "appliance")
	out, err := exec.Command("go", "build", "-o", bin, "../../..").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// pair is two replicas on one database, sharing a workspace folder.
type pair struct {
	t        testing.TB
	bin, dir string
	dsn      string
	ws       string
	db       *pgx.Conn // the test's own connection, to read what the replicas wrote
	// serverYAML is more of each replica's config (say worker_token),
	// set before start.
	serverYAML string
}

// newPair makes the database and the workspace (yaml, as workspace "ws");
// start the replicas with start.
func newPair(t testing.TB, yaml string) *pair {
	t.Helper()
	skipShort(t)
	return newPairOn(t, pgtest.DSN(t), yaml)
}

func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
}

// newPairOn is newPair on the database dsn (of a cluster of the test's
// own, say, that it restarts).
func newPairOn(t testing.TB, dsn, yaml string) *pair {
	t.Helper()
	skipShort(t)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &pair{t: t, bin: bin, dir: dir, dsn: dsn, ws: filepath.Join(dir, "ws")}
	if err := os.MkdirAll(filepath.Join(p.ws, ".workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.ws, ".workflows", "main.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// replica is one `appliance serve` process of the pair.
type replica struct {
	p    *pair
	name string
	addr string
	url  string
	cmd  *exec.Cmd
	log  string // its stdout and stderr
}

// start runs replica name (its application_name in the database, so the
// write log names it) with in-process workers, and waits until it answers.
func (p *pair) start(name string, workers int) *replica {
	t := p.t
	t.Helper()
	r := &replica{p: p, name: name, addr: freePort(t)}
	r.url = "http://" + r.addr
	home := filepath.Join(p.dir, name)
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`storage:
  type: postgres
  dsn: ${APPLIANCE_DATABASE_URL}
ha:
  lease: %s
  renew: %s
  advertise_url: %s
  peer_secret: failover-test-peer-secret
%s`, lease, renew, r.url, p.serverYAML)
	cfgPath := filepath.Join(home, "server.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Each start appends to the same log, which the test prints if it fails.
	r.log = filepath.Join(home, "serve.log")
	out, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(p.bin, "serve", "--config", cfgPath, "--listen", r.addr, "--data-dir", filepath.Join(home, "data"),
		"--workspace", p.ws, "--workers", fmt.Sprint(workers))
	r.cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(home, "tmp"),
		"APPLIANCE_DATABASE_URL="+p.dsn+"&application_name="+name)
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := r.cmd
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		out.Close()
		if t.Failed() || os.Getenv("FAILOVER_LOGS") != "" {
			b, _ := os.ReadFile(r.log)
			t.Logf("replica %s's log:\n%s", name, tail(string(b), 150))
		}
	})
	waitFor(t, 20*time.Second, "replica "+name+" to answer", func() bool {
		_, err := r.status()
		return err == nil
	})
	return r
}

func tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// status is /api/config's ha part: each replica answers it itself.
func (r *replica) status() (wire.HAStatus, error) {
	var cfg wire.Config
	code, err := call("GET", r.url+"/api/config", "", nil, &cfg)
	if err != nil {
		return wire.HAStatus{}, err
	}
	if code != http.StatusOK || cfg.HA == nil {
		return wire.HAStatus{}, fmt.Errorf("GET /api/config: status %d, ha %v", code, cfg.HA)
	}
	return *cfg.HA, nil
}

// leads reports whether the replica answers as the leader.
func (r *replica) leads() bool {
	st, err := r.status()
	return err == nil && st.Leading
}

var client = &http.Client{Timeout: 10 * time.Second}

// call sends a request with a JSON body (body "" = none) and decodes a 200
// answer into out.
func call(method, url, body string, header http.Header, out any) (int, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.NewDecoder(bytes.NewReader(raw)).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w (%q)", method, url, err, raw)
		}
	}
	return resp.StatusCode, nil
}

// connect opens the test's own connection to the pair's database.
func (p *pair) connect() *pgx.Conn {
	p.t.Helper()
	if p.db == nil {
		db, err := pgx.Connect(context.Background(), p.dsn+"&application_name=test")
		if err != nil {
			p.t.Fatal(err)
		}
		p.db = db
		p.t.Cleanup(func() { _ = db.Close(context.Background()) })
	}
	return p.db
}

// recordWrites makes the database log every row a replica writes to the
// state's tables, with the writer's application_name and the time of the
// write (the database's clock), and every change of the lease. Call it
// once the first replica has created the schema.
func (p *pair) recordWrites() {
	p.t.Helper()
	_, err := p.connect().Exec(context.Background(), `
CREATE TABLE write_log (writer text NOT NULL, tbl text NOT NULL, epoch bigint, at timestamptz NOT NULL);
CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO write_log (writer, tbl, at) VALUES (current_setting('application_name'), TG_TABLE_NAME, clock_timestamp());
    RETURN NULL;
END $$;
CREATE FUNCTION log_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO write_log (writer, tbl, epoch, at) VALUES (current_setting('application_name'), TG_TABLE_NAME, NEW.epoch, clock_timestamp());
    RETURN NULL;
END $$;
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['jobs', 'steps', 'workers', 'trigger_fires', 'event_marks', 'job_keys', 'users'] LOOP
        EXECUTE format('CREATE TRIGGER log_write AFTER INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION log_write()', t);
    END LOOP;
END $$;
CREATE TRIGGER log_write AFTER UPDATE ON leader_lease FOR EACH ROW WHEN (OLD.epoch IS DISTINCT FROM NEW.epoch) EXECUTE FUNCTION log_lease();
`)
	if err != nil {
		p.t.Fatal(err)
	}
}

// epoch is the lease's epoch now.
func (p *pair) epoch() int64 {
	p.t.Helper()
	var e int64
	if err := p.connect().QueryRow(context.Background(), `SELECT epoch FROM leader_lease`).Scan(&e); err != nil {
		p.t.Fatal(err)
	}
	return e
}

// lateWrites counts the rows writer wrote to the state's tables after
// the lease reached epoch (as the write log has it).
func (p *pair) lateWrites(writer string, epoch int64) int {
	p.t.Helper()
	var n int
	err := p.connect().QueryRow(context.Background(), `SELECT count(*) FROM write_log w
		WHERE w.writer = $1 AND w.tbl <> 'leader_lease'
		AND w.at > (SELECT min(at) FROM write_log WHERE tbl = 'leader_lease' AND epoch >= $2)`, writer, epoch).Scan(&n)
	if err != nil {
		p.t.Fatal(err)
	}
	return n
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// execute submits task with an Idempotency-Key, to the replicas in turn
// from the first, retrying 503s and broken connections as the CLI does,
// until one acknowledges it; it returns the job's id.
func execute(t testing.TB, task, key string, replicas ...*replica) (string, error) {
	h := http.Header{"Idempotency-Key": {key}}
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		r := replicas[i%len(replicas)]
		var out wire.JobCreated
		code, err := call("POST", r.url+"/api/workspaces/ws/tasks/"+task+"/execute", `{"input": {}}`, h, &out)
		if err == nil && code == http.StatusOK {
			return out.JobID, nil
		}
		if err == nil && code != http.StatusServiceUnavailable {
			return "", fmt.Errorf("execute %s on %s: status %d", task, r.name, code)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("execute %s: no replica acknowledged it within a minute (last: %d %v)", task, code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// job reads a job through r.
func (r *replica) job(id string) (wire.JobDetail, error) {
	var j wire.JobDetail
	code, err := call("GET", r.url+"/api/jobs/"+id, "", nil, &j)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET job %s via %s: status %d", id, r.name, code)
	}
	return j, err
}

// waitEnded waits for job id to end, read through r, and returns it.
func (r *replica) waitEnded(t testing.TB, id string, timeout time.Duration) wire.JobDetail {
	t.Helper()
	var j wire.JobDetail
	waitFor(t, timeout, "job "+id+" to end", func() bool {
		var err error
		j, err = r.job(id)
		return err == nil && terminal(j.Status)
	})
	return j
}

func terminal(status string) bool {
	switch status {
	case "completed", "failed", "cancelled", "skipped":
		return true
	}
	return false
}
