package runners

import (
	"bufio"
	"io"
	"strings"
)

// maxLine is where a long output line is split: the parts are logged as
// separate lines rather than dropped or held in memory without bound.
const maxLine = 64 << 10

// readLines sends each line of r to log until EOF or a read error (the pipe
// closed under it once the step is over).
func readLines(r io.Reader, stream string, log func(stream, line string)) {
	br := bufio.NewReaderSize(r, maxLine)
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			return
		}
		line := string(chunk)
		if !isPrefix {
			line = strings.TrimSuffix(line, "\r")
		}
		log(stream, line)
	}
}
