package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/store/postgres"
)

func init() { commands["migrate"] = runMigrate }

// runMigrate brings a PostgreSQL database to this binary's schema, as
// `serve` does at start-up, so an operator can do it (or, with --dry-run,
// see what it would do) before rolling out a new version.
func runMigrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFlag := fs.String("config", "", "server config file (default $APPLIANCE_CONFIG)")
	dryRun := fs.Bool("dry-run", false, "print the migrations the database lacks, changing nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "appliance migrate: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := config.LoadServer(config.Path(*configFlag))
	if err != nil {
		fmt.Fprintln(stderr, "appliance migrate:", err)
		return 2
	}
	if !cfg.Storage.Postgres() {
		fmt.Fprintf(stdout, "storage.type is bbolt (%s): nothing to migrate; bbolt's file is brought up to date when the server opens it\n", cfg.DBPath())
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := migrate(ctx, cfg.Storage, *dryRun, stdout); err != nil {
		fmt.Fprintln(stderr, "appliance migrate:", err)
		return 1
	}
	return 0
}

func migrate(ctx context.Context, s config.Storage, dryRun bool, stdout io.Writer) error {
	before, err := postgres.PlanMigrations(ctx, s.DSN)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if dryRun {
		if len(before.Pending) == 0 {
			fmt.Fprintf(stdout, "the database is at schema version %d, this binary's: nothing to apply\n", before.Current)
			return nil
		}
		fmt.Fprintf(stdout, "the database is at schema version %d, this binary's is %d; migrate would apply, in order:\n", before.Current, before.Latest)
		for _, m := range before.Pending {
			fmt.Fprintf(stdout, "  %s\n", m.Name)
		}
		fmt.Fprintln(stdout, "(dry run: nothing was changed)")
		return nil
	}
	// Open migrates under the advisory lock, as a starting server does, so
	// a migrate run beside a starting replica never applies a version twice.
	db, err := postgres.Open(ctx, postgres.Config{DSN: s.DSN, MaxConns: 1})
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if err := db.Close(); err != nil {
		return err
	}
	after, err := postgres.PlanMigrations(ctx, s.DSN)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if len(after.Pending) > 0 {
		return errors.New("the database still lacks migrations after migrating") // Open would have failed
	}
	if after.Current == before.Current {
		fmt.Fprintf(stdout, "the database is at schema version %d, this binary's: nothing to apply\n", after.Current)
		return nil
	}
	fmt.Fprintf(stdout, "the database is now at schema version %d (it was at %d):\n", after.Current, before.Current)
	for _, m := range before.Pending {
		if m.Version <= after.Current {
			fmt.Fprintf(stdout, "  %s\n", m.Name)
		}
	}
	return nil
}
