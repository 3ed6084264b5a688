package worker

import (
	"strconv"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine/jsonstr"
)

// encodedJSON is a request body already in JSON: call sends it as it is.
type encodedJSON []byte

// appendLogPush appends push as JSON, as encoding/json reads it back:
// reflection was most of the worker's time coding a push, which holds
// up to maxPushLines lines. False, with dst as it was, for what it leaves
// to encoding/json: times encoding/json refuses. (jsonstr puts U+FFFD for
// bytes that are not UTF-8, as encoding/json does.)
func appendLogPush(dst []byte, push workerproto.LogPush) ([]byte, bool) {
	start := len(dst)
	dst = appendPushHead(dst, push)
	var times jsonstr.Times
	for i, l := range push.Lines {
		if !jsonTime(l.TS) {
			return dst[:start], false
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if l.Seq != 0 {
			dst = append(dst, `"seq":`...)
			dst = strconv.AppendInt(dst, l.Seq, 10)
			dst = append(dst, ',')
		}
		dst = append(dst, `"ts":"`...)
		dst = times.Append(dst, l.TS)
		dst = append(dst, `","stream":`...)
		dst = jsonstr.AppendString(dst, l.Stream)
		dst = append(dst, `,"line":`...)
		dst = jsonstr.AppendString(dst, l.Line)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...), true
}

// appendPushHead appends push up to the first of its lines.
func appendPushHead(dst []byte, push workerproto.LogPush) []byte {
	dst = append(dst, `{"worker_id":`...)
	dst = jsonstr.AppendString(dst, push.WorkerID)
	dst = append(dst, `,"step_name":`...)
	dst = jsonstr.AppendString(dst, push.StepName)
	if push.Run != "" {
		dst = append(dst, `,"run":`...)
		dst = jsonstr.AppendString(dst, push.Run)
	}
	return append(dst, `,"lines":[`...)
}

// jsonTime tells a time encoding/json codes: its year has four digits and
// its zone is less than a day off UTC.
func jsonTime(t time.Time) bool {
	_, off := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && off > -24*3600 && off < 24*3600
}

// logPushSize is about the bytes of push as JSON, to size its buffer.
func logPushSize(push workerproto.LogPush) int {
	n := 128 + len(push.WorkerID) + len(push.StepName) + len(push.Run)
	for _, l := range push.Lines {
		n += 80 + len(l.Stream) + len(l.Line)
	}
	return n
}
