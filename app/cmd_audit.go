package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/appliance-sh/appliance/app/cli"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/audit"
)

func init() { commands["audit"] = runAudit }

// runAudit is `appliance audit`: verify --config checks a stopped
// server's store here (bbolt's file lock refuses a live server's file);
// everything else goes through the API (app/cli).
func runAudit(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "verify" && slices.ContainsFunc(args[1:], func(a string) bool {
		return a == "--config" || a == "-config" || len(a) > 9 && (a[:9] == "--config=" || a[:8] == "-config=")
	}) {
		return verifyStore(args[1:], stdout, stderr)
	}
	return cli.Commands["audit"](args, stdout, stderr)
}

// verifyStore checks the chain in the store a config names, from its
// anchor to a logged head (--head), or else to the head the store holds.
func verifyStore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFlag := fs.String("config", "", "server config file (default $APPLIANCE_CONFIG)")
	headFlag := fs.String("head", "", "the last head the server logged, SEQ:MAC (default: the head the store holds)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logged, err := cli.LoggedHead(*headFlag)
	if err != nil {
		fmt.Fprintln(stderr, "appliance audit verify:", err)
		return 2
	}
	cfg, err := config.LoadServer(config.Path(*configFlag))
	if err != nil {
		fmt.Fprintln(stderr, "appliance audit verify:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	v, verr, err := verifyStoreChain(ctx, cfg, logged)
	if err != nil {
		fmt.Fprintln(stderr, "appliance audit verify:", err)
		return 1
	}
	return cli.ReportVerify(stdout, stderr, v, verr)
}

// verifyStoreChain opens the storage and checks its chain; err is a
// failure to check, verr what the check found.
func verifyStoreChain(ctx context.Context, cfg *config.Server, logged *audit.Head) (v *audit.Verifier, verr, err error) {
	key, _, err := cfg.AuditKey(false)
	if err != nil {
		return nil, nil, err
	}
	cfg.LogStorage.LocalDir = cfg.LogDir()
	st, err := openStorage(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	if err := st.openRecords(cfg, nil); err != nil {
		return nil, nil, err
	}
	as, ok := st.state.(audit.Store)
	if !ok {
		return nil, nil, fmt.Errorf("the %s store keeps no audit trail", cfg.Storage.Type)
	}
	return audit.VerifyStore(ctx, key, as, logged)
}
