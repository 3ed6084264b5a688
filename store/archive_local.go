package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/appliance-sh/appliance/engine"
)

// LocalArchive keeps archived logs as files under a directory, one
// subdirectory per key segment.
type LocalArchive struct {
	dir string
}

var _ Archive = (*LocalArchive)(nil)

// NewLocalArchive uses dir (created if needed) as the archive.
func NewLocalArchive(dir string) (*LocalArchive, error) {
	if dir == "" {
		return nil, fmt.Errorf("local archive: path is required: %w", engine.ErrInvalid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create archive dir: %w", err)
	}
	return &LocalArchive{dir: dir}, nil
}

func (a *LocalArchive) path(key string) (string, error) {
	if err := checkArchiveKey(key); err != nil {
		return "", err
	}
	return filepath.Join(a.dir, filepath.FromSlash(key)), nil
}

// Put writes the object through a temporary file renamed into place, so a
// reader or a crash never leaves half an archive under the key.
func (a *LocalArchive) Put(ctx context.Context, key string, gzipped []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("archive %s: %w", key, err)
	}
	path, err := a.path(key)
	if err != nil {
		return fmt.Errorf("archive log: %w", err)
	}
	if err := writeFileAtomic(path, gzipped); err != nil {
		return fmt.Errorf("archive %s: %w", key, err)
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Get reads an archived object (engine.ErrNotFound when there is none).
func (a *LocalArchive) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read archive %s: %w", key, err)
	}
	path, err := a.path(key)
	if err != nil {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("archive %s: %w", key, engine.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read archive %s: %w", key, err)
	}
	return data, nil
}
