package workflow

import "time"

// Timeout limits of the format.
const (
	MaxTaskTimeout = 7 * 24 * time.Hour
	MaxStepTimeout = 24 * time.Hour
)
