package local

import (
	"fmt"
	"os"
)

// stepFiles are the files a step's process reads: its inline script (if
// any) and its input as JSON ($APPLIANCE_INPUT). They are removed when the
// step ends.
type stepFiles struct {
	script string // path of the inline script, "" for a source file
	input  string // path of the input JSON
}

// newStepFiles writes script (nil for none) and input under tempDir.
// ext is the script's file extension (some interpreters go by it).
func newStepFiles(tempDir, ext string, script, input []byte) (*stepFiles, error) {
	f := &stepFiles{}
	var err error
	if f.input, err = writeTemp(tempDir, "appliance-input-*.json", input); err != nil {
		return nil, fmt.Errorf("write input file: %w", err)
	}
	if script != nil {
		if f.script, err = writeTemp(tempDir, "appliance-script-*"+ext, script); err != nil {
			f.close()
			return nil, fmt.Errorf("write script: %w", err)
		}
	}
	return f, nil
}

// writeTemp writes content to a new file named after pattern, readable by
// the owner only (the input may hold secrets; interpreters need only read
// a script).
func writeTemp(dir, pattern string, content []byte) (string, error) {
	file, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	_, err = file.Write(content)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file.Name())
		return "", err
	}
	return file.Name(), nil
}

func (f *stepFiles) close() {
	os.Remove(f.input)
	if f.script != "" {
		os.Remove(f.script)
	}
}

// defaultTempDir is where step files go: a RAM-backed /dev/shm where the
// machine has one, since every step writes and removes two small files (on
// a busy disk that costs more than starting the process), else the system
// temporary directory.
func defaultTempDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if probe, err := os.CreateTemp("/dev/shm", "appliance-probe-*"); err == nil {
			probe.Close()
			os.Remove(probe.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}
