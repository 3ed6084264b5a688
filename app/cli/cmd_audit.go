package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/appliance-sh/appliance/api/client"
	"github.com/appliance-sh/appliance/audit"
)

func init() { Commands["audit"] = cmdAudit }

const auditUsage = `usage:
  appliance audit list [--actor A] [--action A] [--target T] [--since TIME] [--until TIME] [--limit N]
  appliance audit export [filters as for list] > audit.jsonl      (JSON lines, the format SIEMs ingest)
  appliance audit verify --server URL [--key-file F] [--head SEQ:MAC]
  appliance audit verify --file audit.jsonl [--key-file F] [--head SEQ:MAC]
  appliance audit verify --config FILE [--head SEQ:MAC]             (a stopped server's store)
verify needs the chain's key: --key-file, else $APPLIANCE_AUDIT_KEY (with --config, the config's);
--head is the last head the server logged ("audit chain head seq=… mac=…"), so removed newest entries show.`

// cmdAudit is `appliance audit`: reading the trail through the API, and
// checking it there or in an export. (The server's side, verify
// --config, is app's: it opens the store.)
func cmdAudit(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, auditUsage)
		return 2
	}
	switch args[0] {
	case "list", "export":
		return auditRead(args[0], args[1:], stdout, stderr)
	case "verify":
		return auditVerifyRemote(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, auditUsage)
		return 0
	}
	fmt.Fprintf(stderr, "appliance audit: unknown subcommand %q\n%s\n", args[0], auditUsage)
	return 2
}

type auditFilters struct {
	actor, action, target, since, until *string
	limit                               *int
}

func addAuditFilters(cc *clientCommand) auditFilters {
	return auditFilters{
		actor:  cc.fs.String("actor", "", "a user id, email or API key name"),
		action: cc.fs.String("action", "", "an action, or a prefix ending in a dot (job.)"),
		target: cc.fs.String("target", "", "a target (job/ID, user/ID, api_key/PREFIX)"),
		since:  cc.fs.String("since", "", "entries at or after this RFC 3339 time"),
		until:  cc.fs.String("until", "", "entries before this RFC 3339 time"),
		limit:  cc.fs.Int("limit", 0, "at most this many entries (0: all)"),
	}
}

func (f auditFilters) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"actor": *f.actor, "action": *f.action, "target": *f.target, "since": *f.since, "until": *f.until} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// eachAuditEntry pages through the trail, oldest first, calling fn for
// each entry; first is the first page (its anchor and head).
func eachAuditEntry(ctx context.Context, c *client.Client, q url.Values, max int, fn func(audit.Entry) error) (first *audit.Head, anchor audit.Head, err error) {
	n := 0
	for {
		q.Set("limit", "1000")
		page, err := c.Audit(ctx, q)
		if err != nil {
			return nil, anchor, err
		}
		if first == nil {
			h := page.Head
			first, anchor = &h, page.Anchor
		}
		for _, e := range page.Entries {
			if max > 0 && n == max {
				return first, anchor, nil
			}
			if err := fn(e); err != nil {
				return first, anchor, err
			}
			n++
		}
		if page.Next == nil {
			return first, anchor, nil
		}
		q.Set("cursor", strconv.FormatInt(*page.Next, 10))
	}
}

func auditRead(sub string, args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("audit "+sub, "appliance audit "+sub+" [filters]", stdout, stderr)
	f := addAuditFilters(cc)
	if _, code, ok := cc.parse(args, 0); !ok {
		return code
	}
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		w := bufio.NewWriter(stdout)
		defer w.Flush()
		var tw *tabwriter.Writer
		if sub == "list" && !*cc.json {
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tAT\tACTOR\tSOURCE\tACTION\tTARGET\tOUTCOME\tFROM")
			defer tw.Flush()
		}
		enc := json.NewEncoder(w)
		_, _, err := eachAuditEntry(ctx, c, f.query(), *f.limit, func(e audit.Entry) error {
			if tw == nil {
				return enc.Encode(e)
			}
			outcome := e.Outcome
			if e.Reason != "" {
				outcome += " (" + e.Reason + ")"
			}
			_, err := fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, shortTime(e.At), actorText(e.Actor), e.Source, e.Action, dash(e.Target), outcome, dash(e.ClientAddress))
			return err
		})
		if err != nil {
			return 1, err
		}
		return 0, nil
	})
}

func actorText(a audit.Actor) string {
	s := a.Email
	if s == "" {
		s = a.ID
	}
	if a.Key != "" {
		s += " (key " + a.Key + ")"
	}
	return dash(s)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// VerifyFlags are verify's key and head options, shared with app's
// verify --config.
type VerifyFlags struct {
	KeyFile, Head *string
}

// AuditKeyFrom reads the chain's key from a file, else from
// $APPLIANCE_AUDIT_KEY.
func AuditKeyFrom(file string) (audit.Key, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read the audit key: %w", err)
		}
		return audit.Key(strings.TrimSpace(string(data))), nil
	}
	if k := os.Getenv("APPLIANCE_AUDIT_KEY"); k != "" {
		return audit.Key(k), nil
	}
	return nil, errors.New("verify needs the chain's key: --key-file FILE or $APPLIANCE_AUDIT_KEY")
}

// LoggedHead parses --head, nil when not given.
func LoggedHead(s string) (*audit.Head, error) {
	if s == "" {
		return nil, nil
	}
	h, err := audit.ParseHead(s)
	return &h, err
}

// ReportVerify prints a verify's outcome and returns the exit code: 0
// when the chain holds, 1 naming the first broken entry.
func ReportVerify(stdout, stderr io.Writer, v *audit.Verifier, err error) int {
	if err == nil {
		err = v.End()
	}
	if err != nil {
		fmt.Fprintf(stderr, "appliance audit verify: BROKEN: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "audit trail OK: %d entries verified, head %s\n", v.Count(), v.Head())
	return 0
}

func auditVerifyRemote(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("audit verify", "appliance audit verify (--server URL | --file FILE) [--key-file F] [--head SEQ:MAC]", stdout, stderr)
	file := cc.fs.String("file", "", "verify an export (appliance audit export) instead of a server")
	keyFile := cc.fs.String("key-file", "", "the chain's key (default $APPLIANCE_AUDIT_KEY)")
	headFlag := cc.fs.String("head", "", "the last head the server logged, SEQ:MAC")
	if _, code, ok := cc.parse(args, 0); !ok {
		return code
	}
	key, err := AuditKeyFrom(*keyFile)
	if err != nil {
		return cc.usageError("%v", err)
	}
	logged, err := LoggedHead(*headFlag)
	if err != nil {
		return cc.usageError("%v", err)
	}
	if *file != "" {
		return verifyFile(*file, key, logged, stdout, stderr)
	}
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		// The first page says where the chain starts, and the head the
		// server holds: without --head, only its own word on the end.
		first, err := c.Audit(ctx, url.Values{"limit": {"1"}})
		if err != nil {
			return 1, err
		}
		head := logged
		if head == nil {
			head = &first.Head
		}
		v := audit.NewVerifier(key, first.Anchor, head)
		var verr error
		_, _, err = eachAuditEntry(ctx, c, url.Values{}, 0, func(e audit.Entry) error {
			if verr = v.Next(&e); verr != nil {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return 1, err
		}
		return ReportVerify(stdout, stderr, v, verr), nil
	})
}

var errStop = errors.New("stop")

// verifyFile checks an export: it starts at the export's first entry,
// from the zero anchor when that is entry 1, else trusting the first
// entry as its anchor (an export of a trimmed trail holds no anchor).
func verifyFile(path string, key audit.Key, logged *audit.Head, stdout, stderr io.Writer) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(stderr, "appliance audit verify: %v\n", err)
		return 1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var v *audit.Verifier
	line := 0
	for sc.Scan() {
		line++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintf(stderr, "appliance audit verify: %s:%d: %v\n", path, line, err)
			return 1
		}
		if v == nil {
			if e.Seq == 1 {
				v = audit.NewVerifier(key, audit.Head{}, logged)
			} else {
				fmt.Fprintf(stderr, "appliance audit verify: the export starts at entry %d: checking from there (its own MAC is taken on trust)\n", e.Seq)
				v = audit.NewVerifier(key, e.Head(), logged)
				continue
			}
		}
		if err := v.Next(&e); err != nil {
			return ReportVerify(stdout, stderr, v, err)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(stderr, "appliance audit verify: %s: %v\n", path, err)
		return 1
	}
	if v == nil {
		v = audit.NewVerifier(key, audit.Head{}, logged)
	}
	return ReportVerify(stdout, stderr, v, nil)
}
