//go:build unix

package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive lock on dir/.lock, held while the returned
// file is open (the kernel drops it when the process dies).
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool_dir: lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("spool_dir %s is in use by another worker process: give each worker its own spool_dir (or worker_name)", dir)
		}
		return nil, fmt.Errorf("spool_dir: lock %s: %w", dir, err)
	}
	return f, nil
}
