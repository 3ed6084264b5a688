// Package pgtest runs a real PostgreSQL for the tests: a throwaway cluster
// made with initdb and started with pg_ctl in a temporary folder, on a free
// port and a socket in that folder, and one new database per test.
//
// initdb refuses to run as root, so under root the cluster belongs to a
// non-root user (APPLIANCE_PG_USER, else "postgres", which Debian's package
// creates). Without the server's binaries the tests skip, saying why, except
// under APPLIANCE_REQUIRE_POSTGRES=1 (CI sets it once it has installed them),
// where they fail.
//
// A package using DSN must run its tests through Main, which stops the
// shared cluster when they end:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv, set to 1, turns a missing PostgreSQL from a skip into a failure.
const RequireEnv = "APPLIANCE_REQUIRE_POSTGRES"

// Superuser is the cluster's superuser, trusted on the socket and loopback.
const Superuser = "appliance"

// dirPrefix names the clusters' folders, so a later run can find and stop
// the ones a killed test process left behind.
const dirPrefix = "appliance-pg-"

// Options tune a cluster.
type Options struct {
	// Durable keeps fsync and synchronous commits on, as a production
	// server has them (benchmarks want this). Off, the cluster skips
	// fsync: a test that kills a server process, not the machine, loses
	// nothing either way, and runs faster.
	Durable bool
}

// Cluster is a running PostgreSQL made for tests.
type Cluster struct {
	Dir    string // the cluster's folder: data, socket, log
	Socket string // the folder holding the Unix socket
	Port   int
	pid    int
	n      atomic.Int64
	// What Restart needs to start the server again as Start did.
	bin      string
	cred     *syscall.Credential
	settings []string
}

// Binaries finds the folder holding initdb, pg_ctl and postgres:
// APPLIANCE_PG_BIN, else the newest /usr/lib/postgresql/N/bin, else the
// PATH. It says why when there is none.
func Binaries() (string, error) {
	if dir := os.Getenv("APPLIANCE_PG_BIN"); dir != "" {
		return dir, nil
	}
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(dirs) > 0 {
		sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				return d, nil
			}
		}
	}
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", errors.New("PostgreSQL's server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql")
	}
	return filepath.Dir(initdb), nil
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// owner is the user the cluster runs as: the current one, or under root a
// non-root user (initdb refuses root).
func owner() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	name := os.Getenv("APPLIANCE_PG_USER")
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("tests run as root and initdb refuses root; no user %q to run PostgreSQL as (set APPLIANCE_PG_USER): %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %q: %w", name, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("APPLIANCE_PG_USER %q is root; initdb refuses root", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Start makes and starts a new cluster. Stop it with Stop.
func Start(opts Options) (*Cluster, error) {
	bin, err := Binaries()
	if err != nil {
		return nil, err
	}
	cred, err := owner()
	if err != nil {
		return nil, err
	}
	reapOrphans()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Socket: dir}
	fail := func(err error) (*Cluster, error) {
		_ = c.Stop()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fail(err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := run(cred, filepath.Join(bin, "initdb"), "-D", data, "-U", Superuser,
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return fail(fmt.Errorf("initdb: %w\n%s", err, out))
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	c.Port, c.bin, c.cred = port, bin, cred
	settings := []string{
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + dir,
		"-c", "max_connections=300",
	}
	if !opts.Durable {
		settings = append(settings, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off")
	}
	c.settings = settings
	if err := c.start(); err != nil {
		return fail(err)
	}
	return c, nil
}

// start starts the server on the cluster's data folder with pg_ctl and
// waits until it accepts connections.
func (c *Cluster) start() error {
	data := filepath.Join(c.Dir, "data")
	if out, err := run(c.cred, filepath.Join(c.bin, "pg_ctl"), "start", "-w", "-t", "60", "-D", data,
		"-l", filepath.Join(c.Dir, "server.log"), "-o", strings.Join(c.settings, " ")); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	pid, err := postmasterPID(data)
	if err != nil {
		return err
	}
	c.pid = pid
	return nil
}

// Restart stops the server with a fast shutdown (SIGINT to the
// postmaster: sessions are cut, committed data kept, as an operator's
// restart or a failover of the database does) and starts it again on the
// same data folder and port. Clients see their connections broken and
// connection refused until it is back. A test that restarts a cluster
// must have its own (Start), not the shared one other tests use.
func (c *Cluster) Restart() error {
	if c.pid > 0 {
		stopPID(c.pid, syscall.SIGINT)
		c.pid = 0
	}
	return c.start()
}

func run(cred *syscall.Credential, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	cmd.Dir = os.TempDir()
	return cmd.CombinedOutput()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func postmasterPID(data string) (int, error) {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("read postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// Stop stops the server by its PID (an immediate shutdown: the data is
// thrown away) and removes the cluster's folder.
func (c *Cluster) Stop() error {
	if c.pid > 0 {
		stopPID(c.pid, syscall.SIGQUIT)
		c.pid = 0
	}
	return os.RemoveAll(c.Dir)
}

// stopPID asks the postmaster for a shutdown (SIGQUIT: immediate,
// SIGINT: fast) and waits, with a deadline, for it to be gone.
func stopPID(pid int, sig syscall.Signal) {
	if syscall.Kill(pid, sig) != nil {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// reapOrphans stops the clusters of test processes that died without
// stopping theirs (a test binary killed at its timeout).
func reapOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		owner, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || syscall.Kill(owner, 0) == nil {
			continue // its test process still runs
		}
		if pid, err := postmasterPID(filepath.Join(dir, "data")); err == nil {
			stopPID(pid, syscall.SIGQUIT)
		}
		_ = os.RemoveAll(dir)
	}
}

// DSN is the URL of a database of the cluster, over its Unix socket.
func (c *Cluster) DSN(database string) string {
	q := url.Values{"host": {c.Socket}, "port": {strconv.Itoa(c.Port)}, "user": {Superuser}, "sslmode": {"disable"}}
	return "postgres:///" + url.PathEscape(database) + "?" + q.Encode()
}

// TCPDSN is the URL of a database of the cluster over loopback TCP.
func (c *Cluster) TCPDSN(database string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", Superuser, c.Port, url.PathEscape(database))
}

// CreateDatabase makes a new, empty database and returns its name.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.n.Add(1))
	return name, c.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

// DropDatabase drops a database, closing any connection still open to it.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	return c.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func (c *Cluster) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// lazy is a cluster started at its first use and stopped by Main.
type lazy struct {
	opts Options
	mu   sync.Mutex
	c    *Cluster
	err  error
}

var (
	shared  = &lazy{}
	durable = &lazy{opts: Options{Durable: true}}
)

func (l *lazy) get(t testing.TB) *Cluster {
	t.Helper()
	l.mu.Lock()
	if l.c == nil && l.err == nil {
		l.c, l.err = Start(l.opts)
	}
	c, err := l.c, l.err
	l.mu.Unlock()
	if err != nil {
		Unavailable(t, err)
	}
	return c
}

func (l *lazy) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		if err := l.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop the cluster:", err)
		}
		l.c = nil
	}
}

// Shared returns the package's cluster, started at its first use and
// stopped by Main. Without PostgreSQL it skips t, saying why (fails it
// under APPLIANCE_REQUIRE_POSTGRES=1).
func Shared(t testing.TB) *Cluster {
	t.Helper()
	return shared.get(t)
}

// Durable returns the package's durable cluster (fsync and synchronous
// commits on, as a production server has them: benchmarks compare its
// figures with bbolt's fsync'd commits), started at its first use and
// stopped by Main. Without PostgreSQL it skips t as Shared does.
func Durable(t testing.TB) *Cluster {
	t.Helper()
	return durable.get(t)
}

// Unavailable skips t because PostgreSQL cannot run here, or fails it when
// APPLIANCE_REQUIRE_POSTGRES=1.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("PostgreSQL is required (%s=1) but cannot run: %v", RequireEnv, err)
	}
	t.Skipf("PostgreSQL cannot run here, skipped: %v", err)
}

// DSN returns the URL of a new, empty database on the shared cluster,
// dropped when the test ends.
func DSN(t testing.TB) string {
	t.Helper()
	return Shared(t).Database(t)
}

// Database returns the URL (over the Unix socket) of a new, empty
// database of c, dropped when the test ends.
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatalf("create a test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.DropDatabase(ctx, name); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return c.DSN(name)
}

// Main runs the package's tests and then stops the clusters they started.
func Main(m *testing.M) int {
	code := m.Run()
	shared.stop()
	durable.stop()
	return code
}
