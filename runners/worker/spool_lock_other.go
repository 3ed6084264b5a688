//go:build !unix

package worker

import (
	"os"
	"path/filepath"
)

// lockDir opens dir/.lock; without flock two workers sharing a spool_dir
// are not detected.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
}
