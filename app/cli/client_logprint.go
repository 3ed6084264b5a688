package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// logPrinter prints JSONL log lines as `HH:MM:SS step | line` (stderr
// lines use `!` in place of `|`), in local time. It takes chunks as the
// stream delivers them, which may end mid-line.
type logPrinter struct {
	w    io.Writer
	step string // print only this step's lines; "" = all
	raw  bool   // print the JSONL lines as they are (--json)

	width   int    // widest step name so far, so columns line up
	partial []byte // an incomplete last line, waiting for its end
	seen    int    // complete lines taken, printed or filtered out
	drop    int    // lines still to skip: a reconnect resends the log from its start
}

// wireLogLine is one line of a job's JSONL log.
type wireLogLine struct {
	TS     time.Time `json:"ts"`
	Stream string    `json:"stream"`
	Step   string    `json:"step"`
	Line   string    `json:"line"`
}

// write takes the next chunk of the log.
func (p *logPrinter) write(chunk []byte) {
	data := append(p.partial, chunk...)
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		p.partial = data
		return
	}
	p.partial = append([]byte(nil), data[end+1:]...)
	lines := bytes.Split(data[:end], []byte("\n"))
	parsed := make([]*wireLogLine, len(lines))
	for i, raw := range lines {
		var l wireLogLine
		if json.Unmarshal(raw, &l) == nil {
			parsed[i] = &l
		}
	}
	// Widths grow chunk by chunk: the backfill, the bulk of a log, lines
	// up as a whole.
	for i, l := range parsed {
		if l != nil && p.shows(l) && i >= p.drop {
			p.width = max(p.width, len(l.Step))
		}
	}
	for i, raw := range lines {
		p.seen++
		if p.drop > 0 {
			p.drop--
			continue
		}
		p.print(raw, parsed[i])
	}
}

// flush prints an incomplete last line, once no more data will come.
func (p *logPrinter) flush() {
	if len(p.partial) > 0 {
		p.write([]byte("\n"))
	}
}

// restart prepares for the log to be sent again from its beginning.
func (p *logPrinter) restart() {
	p.drop, p.seen, p.partial = p.seen, 0, nil
}

func (p *logPrinter) shows(l *wireLogLine) bool { return p.step == "" || l.Step == p.step }

// print writes one line; l is its decoded form, nil when it is not JSON.
func (p *logPrinter) print(raw []byte, l *wireLogLine) {
	switch {
	case len(bytes.TrimSpace(raw)) == 0:
	case l == nil:
		// A legacy .log file holds plain text; it belongs to no step.
		if p.step == "" {
			fmt.Fprintf(p.w, "%s\n", raw)
		}
	case !p.shows(l):
	case p.raw:
		fmt.Fprintf(p.w, "%s\n", raw)
	default:
		mark := "|"
		if l.Stream == "stderr" {
			mark = "!"
		}
		fmt.Fprintf(p.w, "%s %-*s %s %s\n", l.TS.Local().Format("15:04:05"), p.width, l.Step, mark, l.Line)
	}
}
