package workflow

import (
	"fmt"
	"path/filepath"
	"strings"
)

// ShellScriptArgs finds, in a container's argv (entrypoint then command,
// as the runtime joins them), the item a shell runs as a script: the one
// after -c in [sh, -c, "..."] (bash, busybox sh... too). Keys name the item
// as `entrypoint[i]` or `command[i]`.
func ShellScriptArgs(entrypoint, command []string) map[string]bool {
	argv := append(append([]string(nil), entrypoint...), command...)
	if len(argv) < 3 {
		return nil
	}
	i := 1
	name := strings.TrimSuffix(filepath.Base(argv[0]), ".exe")
	if name == "busybox" && argv[1] == "sh" {
		i = 2
	} else if !posixShells[name] && name != "zsh" {
		return nil
	}
	for ; i < len(argv)-1; i++ {
		opt := argv[i]
		if opt == "--" || !strings.HasPrefix(opt, "-") {
			return nil
		}
		if !strings.HasPrefix(opt, "--") && strings.Contains(opt, "c") {
			k := i + 1
			if k < len(entrypoint) {
				return map[string]bool{fmt.Sprintf("entrypoint[%d]", k): true}
			}
			return map[string]bool{fmt.Sprintf("command[%d]", k-len(entrypoint)): true}
		}
	}
	return nil
}

// posixShells are the interpreters a shell script's quoted values are
// written for: every {{ }} value is quoted with POSIX quotes ('...'\”...').
var posixShells = map[string]bool{"sh": true, "bash": true, "dash": true, "ash": true, "busybox": true, "ksh": true, "mksh": true, "yash": true, "posh": true}

// PosixShell reports whether an interpreter (its base name) is a POSIX
// shell, the one kind of shell whose quoted values are data.
func PosixShell(name string) bool { return posixShells[name] }
