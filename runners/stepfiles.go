package runners

import (
	"fmt"
	"os"
	"path/filepath"
)

// stepFiles are the files a step's process reads: its inline script (if
// any) and its input as JSON ($APPLIANCE_INPUT), in a directory of their
// own that is removed when the step ends.
type stepFiles struct {
	script string // path of the inline script, "" for a source file
	input  string // path of the input JSON
	dir    string
}

// newStepFiles writes script (nil for none) and input under tempDir.
// scriptName is the script's file name (some interpreters go by its
// extension).
func newStepFiles(tempDir, scriptName string, script, input []byte) (*stepFiles, error) {
	dir, err := os.MkdirTemp(tempDir, "appliance-step-")
	if err != nil {
		return nil, fmt.Errorf("create step temp dir: %w", err)
	}
	f := &stepFiles{dir: dir, input: filepath.Join(dir, "input.json")}
	if script != nil {
		f.script = filepath.Join(dir, scriptName)
		if err := os.WriteFile(f.script, script, 0o700); err != nil {
			f.close()
			return nil, fmt.Errorf("write script: %w", err)
		}
	}
	if err := os.WriteFile(f.input, input, 0o600); err != nil {
		f.close()
		return nil, fmt.Errorf("write input file: %w", err)
	}
	return f, nil
}

func (f *stepFiles) close() { os.RemoveAll(f.dir) }

// defaultTempDir is where step files go: a RAM-backed /dev/shm where the
// machine has one, since every step writes and removes a directory and two
// small files (on a busy disk that costs more than starting the process),
// else the system temporary directory.
func defaultTempDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if probe, err := os.MkdirTemp("/dev/shm", "appliance-probe-"); err == nil {
			os.Remove(probe)
			return "/dev/shm"
		}
	}
	return os.TempDir()
}
