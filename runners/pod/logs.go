package pod

import (
	"bufio"
	"context"
	"io"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/runners"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// PodLogs opens a container's log stream, following it, from since on
// (nil = from the start), each line prefixed with its RFC 3339 timestamp
// and a space (the API's `timestamps`). It is an interface so tests can
// feed line streams that client-go's fake clientset cannot.
type PodLogs interface {
	Stream(ctx context.Context, namespace, pod, container string, since *time.Time) (io.ReadCloser, error)
}

// clientLogs follows logs through the API server.
type clientLogs struct{ client corev1client.CoreV1Interface }

func (l clientLogs) Stream(ctx context.Context, ns, pod, container string, since *time.Time) (io.ReadCloser, error) {
	opts := &corev1.PodLogOptions{Container: container, Follow: true, Timestamps: true}
	if since != nil {
		t := metav1.NewTime(*since)
		opts.SinceTime = &t
	}
	return l.client.Pods(ns).GetLogs(pod, opts).Stream(ctx)
}

// logFollower follows a container's log across dropped streams: a stream
// that ends while the container still runs is reopened from the last
// line's time (SinceTime has whole-second precision on some servers, so
// lines at or before what was already seen are skipped).
type logFollower struct {
	logs      PodLogs
	ns, pod   string
	container string
	sink      func(stream, line string)
	// last is the timestamp of the last line passed on, and atLast how
	// many lines carried exactly it.
	last   time.Time
	atLast int
}

// follow reads one stream to its end; the caller decides whether to
// reopen. It reports whether any line came.
func (f *logFollower) follow(ctx context.Context) (bool, error) {
	var since *time.Time
	if !f.last.IsZero() {
		t := f.last
		since = &t
	}
	rc, err := f.logs.Stream(ctx, f.ns, f.pod, f.container, since)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	defer stop()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	seenAt := 0 // lines at f.last seen in this stream
	got := false
	for sc.Scan() {
		ts, line := splitTimestamp(sc.Text())
		switch {
		case ts.IsZero():
		case ts.Before(f.last):
			continue
		case ts.Equal(f.last):
			seenAt++
			if seenAt <= f.atLast {
				continue
			}
			f.atLast++
		default:
			f.last, f.atLast, seenAt = ts, 1, 1
		}
		got = true
		f.sink(runners.Stdout, line)
	}
	return got, sc.Err()
}

// maxLineBytes bounds one log line read from a pod.
const maxLineBytes = 1 << 20

// splitTimestamp cuts the RFC 3339 timestamp the API puts before each line.
func splitTimestamp(s string) (time.Time, string) {
	head, rest, ok := strings.Cut(s, " ")
	if !ok {
		head, rest = s, ""
	}
	ts, err := time.Parse(time.RFC3339Nano, head)
	if err != nil {
		return time.Time{}, s
	}
	return ts, rest
}
