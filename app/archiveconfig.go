package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

// archiveDrainTimeout bounds how long shutdown waits for pending log
// uploads; what is left is logged and stays in the local JSONL files.
const archiveDrainTimeout = 30 * time.Second

// ArchiveConfig is log_storage.archive: where finished jobs' logs are kept.
type ArchiveConfig struct {
	Type     string `yaml:"type"` // s3 or local
	Bucket   string `yaml:"bucket"`
	Region   string `yaml:"region"`
	Prefix   string `yaml:"prefix"`
	Endpoint string `yaml:"endpoint"` // S3-compatible endpoint; http:// means no TLS
	Path     string `yaml:"path"`     // local
}

// LegacyS3Config is the older log_storage.s3 form of an s3 archive.
type LegacyS3Config struct {
	Bucket   string `yaml:"bucket"`
	Region   string `yaml:"region"`
	Prefix   string `yaml:"prefix"`
	Endpoint string `yaml:"endpoint"`
}

// archive returns the effective archive settings and the config key they
// came from, nil when logs are not archived. `archive` wins over the
// legacy `s3` when both are set.
func (c LogStorageConfig) archive() (*ArchiveConfig, string, error) {
	switch {
	case c.Archive != nil:
		return c.Archive, "log_storage.archive", validateArchive(*c.Archive, "log_storage.archive")
	case c.S3 != nil:
		a := &ArchiveConfig{Type: "s3", Bucket: c.S3.Bucket, Region: c.S3.Region, Prefix: c.S3.Prefix, Endpoint: c.S3.Endpoint}
		return a, "log_storage.s3", validateArchive(*a, "log_storage.s3")
	}
	return nil, "", nil
}

// validateArchive checks the fields each type requires, and refuses those
// it would ignore, since a misplaced field is usually a mistaken type.
func validateArchive(a ArchiveConfig, key string) error {
	type field struct{ name, value string }
	var required, unused []field
	switch a.Type {
	case "s3":
		required = []field{{"bucket", a.Bucket}, {"region", a.Region}}
		unused = []field{{"path", a.Path}}
	case "local":
		required = []field{{"path", a.Path}}
		unused = []field{{"bucket", a.Bucket}, {"region", a.Region}, {"endpoint", a.Endpoint}}
	case "":
		return fmt.Errorf("%s.type: required (s3 or local)", key)
	default:
		return fmt.Errorf("%s.type: unsupported type %q (supported: s3, local)", key, a.Type)
	}
	for _, f := range required {
		if f.value == "" {
			return fmt.Errorf("%s.%s: required for type %s", key, f.name, a.Type)
		}
	}
	for _, f := range unused {
		if f.value != "" {
			return fmt.Errorf("%s.%s: not used by type %s", key, f.name, a.Type)
		}
	}
	return nil
}

// describeArchive is the start-up line for the archive setting.
func (c LogStorageConfig) describeArchive() string {
	a, _, err := c.archive()
	switch {
	case err != nil:
		return err.Error()
	case a == nil:
		return "off"
	case a.Type == "local":
		return fmt.Sprintf("local %s (prefix %q)", a.Path, a.Prefix)
	}
	endpoint := a.Endpoint
	if endpoint == "" {
		endpoint = "aws"
	}
	return fmt.Sprintf("s3 bucket %s, region %s, endpoint %s (prefix %q)", a.Bucket, a.Region, endpoint, a.Prefix)
}

// serverLogs is the log store the server hands to the engine and the API:
// *store.Logs, or *store.ArchivingLogs when logs are archived.
type serverLogs interface {
	engine.LogSink
	engine.StepLogEnder
	api.LogStore
}

// openArchive wraps logs with the configured archive; without one it
// returns logs itself and a nil archiver.
func openArchive(cfg LogStorageConfig, logs *store.Logs, jobs store.JobLookup, log *slog.Logger) (serverLogs, *store.ArchivingLogs, error) {
	a, key, err := cfg.archive()
	if err != nil || a == nil {
		return logs, nil, err
	}
	backend, err := store.NewArchive(store.ArchiveConfig{Type: a.Type, Bucket: a.Bucket, Region: a.Region, Endpoint: a.Endpoint, Path: a.Path})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", key, err)
	}
	archiving := store.NewArchivingLogs(logs, backend, jobs, store.ArchiveOptions{
		Prefix: a.Prefix,
		Logger: log.With("component", "log-archive"),
	})
	return archiving, archiving, nil
}

// drainArchive waits, within archiveDrainTimeout, for the uploads queued
// before shutdown.
func (s *Server) drainArchive() error {
	if s.archive == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), archiveDrainTimeout)
	defer cancel()
	return s.archive.Drain(ctx)
}
