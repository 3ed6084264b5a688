package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/appliance-sh/appliance/engine"
)

// Archive keeps finished jobs' logs, gzip-compressed, under keys made by
// ArchiveKey. Get of a missing key returns an error wrapping
// engine.ErrNotFound.
type Archive interface {
	Put(ctx context.Context, key string, gzipped []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// ArchiveConfig selects and configures an archive backend by Type.
type ArchiveConfig struct {
	Type     string // local or s3
	Bucket   string // s3
	Region   string // s3
	Endpoint string // s3: custom S3-compatible endpoint; http:// means no TLS
	Path     string // local: the archive directory
}

// archiveBackends are the archive implementations by type name.
var archiveBackends = map[string]func(ArchiveConfig) (Archive, error){
	"local": func(c ArchiveConfig) (Archive, error) { return NewLocalArchive(c.Path) },
	"s3":    func(c ArchiveConfig) (Archive, error) { return NewS3Archive(c) },
}

// NewArchive builds the backend named by cfg.Type.
func NewArchive(cfg ArchiveConfig) (Archive, error) {
	newBackend, ok := archiveBackends[cfg.Type]
	if !ok {
		return nil, fmt.Errorf("archive type %q is not supported (supported: local, s3): %w", cfg.Type, engine.ErrInvalid)
	}
	return newBackend(cfg)
}

// ArchiveKey is where a job's log is archived:
// {prefix}{workspace}/{task}/YYYY/MM/DD/YYYY-MM-DDTHH-MM-SS_{job_id}.jsonl.gz.
// The time is the job's creation time in UTC: it is fixed when the job is
// created, so the key of any job can be computed again at read time.
func ArchiveKey(prefix string, job *engine.Job) string {
	t := job.CreatedAt.UTC()
	return prefix + job.Workspace + "/" + job.TaskName + "/" + t.Format("2006/01/02/2006-01-02T15-04-05") + "_" + job.ID + ".jsonl.gz"
}

// checkArchiveKey refuses keys that could escape a local archive directory
// or that no object store would accept.
func checkArchiveKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("archive key %q is not a relative slash-separated path: %w", key, engine.ErrInvalid)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("archive key %q has an empty, . or .. segment: %w", key, engine.ErrInvalid)
		}
	}
	return nil
}
