package engine

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
)

// JobCursor marks a place in the newest-first job list: the creation time
// and id of the last job of a page. A page asked for with it starts at the
// next older job, so jobs created meanwhile (newer) never shift it: no job
// is repeated or skipped. It is opaque to clients.
type JobCursor struct {
	CreatedAt int64 // Unix nanoseconds
	ID        string
}

// CursorOf is the cursor just past j.
func CursorOf(j *Job) string {
	b := make([]byte, 8, 8+len(j.ID))
	binary.BigEndian.PutUint64(b, uint64(j.CreatedAt.UnixNano()))
	return base64.RawURLEncoding.EncodeToString(append(b, j.ID...))
}

// ParseJobCursor reads a cursor made by CursorOf (ErrInvalid otherwise).
func ParseJobCursor(s string) (JobCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) <= 8 || len(b) > 8+128 {
		return JobCursor{}, fmt.Errorf("%w: malformed cursor", ErrInvalid)
	}
	return JobCursor{CreatedAt: int64(binary.BigEndian.Uint64(b)), ID: string(b[8:])}, nil
}

// Time is the cursor's creation time.
func (c JobCursor) Time() time.Time { return time.Unix(0, c.CreatedAt) }

// ValidJobStatus reports whether s is a job status.
func ValidJobStatus(s string) bool {
	switch s {
	case JobPending, JobRunning, JobCompleted, JobFailed, JobCancelled, JobSkipped:
		return true
	}
	return false
}

// ValidSourceType reports whether s is a job source type.
func ValidSourceType(s string) bool {
	switch s {
	case SourceAPI, SourceUser, SourceTrigger, SourceWebhook, SourceHook, SourceTask, SourceLocal:
		return true
	}
	return false
}
