package cli

import "bytes"

// runMain runs the command args[0] as the binary's Main does.
func runMain(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Commands[args[0]](args[1:], &out, &errOut)
	return code, out.String(), errOut.String()
}
