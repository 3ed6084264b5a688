package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/store/dump"
)

func init() {
	commands["export"] = runExport
	commands["import"] = runImport
}

// runExport writes a stopped server's whole state to stdout as JSON
// lines (see store/dump): the way from bbolt to PostgreSQL and back.
// bbolt's file lock refuses a live server's file, saying so.
func runExport(args []string, stdout, stderr io.Writer) int {
	return runDump("export", args, stderr, nil, func(ctx context.Context, src dump.Sources) error {
		n, err := dump.Export(ctx, src, stdout, time.Now())
		if err == nil {
			fmt.Fprintf(stderr, "appliance export: %d records written\n", n)
		}
		return err
	})
}

// runImport reads a dump from stdin into an empty store: it refuses a
// store with records, and a dump that is damaged or cut short, before
// writing anything.
func runImport(args []string, stdout, stderr io.Writer) int {
	var in string
	return runDump("import", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&in, "in", "", "read the dump from this file (default stdin)")
	}, func(ctx context.Context, dst dump.Sources) error {
		r := io.Reader(os.Stdin)
		if in != "" {
			f, err := os.Open(in)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		n, err := dump.Import(ctx, dst, r, os.TempDir())
		if err == nil {
			fmt.Fprintf(stdout, "appliance import: %d records read\n", n)
		}
		return err
	})
}

func runDump(name string, args []string, stderr io.Writer, flags func(*flag.FlagSet), do func(context.Context, dump.Sources) error) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFlag := fs.String("config", "", "server config file (default $APPLIANCE_CONFIG)")
	if flags != nil {
		flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "appliance %s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	cfg, err := config.LoadServer(config.Path(*configFlag))
	if err != nil {
		fmt.Fprintf(stderr, "appliance %s: %v\n", name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := withDumpSources(ctx, cfg, do); err != nil {
		fmt.Fprintf(stderr, "appliance %s: %v\n", name, err)
		return 1
	}
	return 0
}

// withDumpSources opens the storage the config names, as serve does, and
// hands its records, logs and snapshots to do.
func withDumpSources(ctx context.Context, cfg *config.Server, do func(context.Context, dump.Sources) error) error {
	cfg.LogStorage.LocalDir = cfg.LogDir()
	st, err := openStorage(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.openRecords(cfg, nil); err != nil {
		return err
	}
	src := dump.Sources{Logs: st.logs}
	var ok bool
	if src.Store, ok = st.state.(dump.Store); !ok {
		return fmt.Errorf("storage %s cannot be exported or imported", cfg.Storage.Type)
	}
	if src.Snapshots, ok = st.snapshots.(dump.Snapshots); !ok {
		return fmt.Errorf("storage %s cannot export or import revision snapshots", cfg.Storage.Type)
	}
	return do(ctx, src)
}
