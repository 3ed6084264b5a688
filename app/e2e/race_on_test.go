//go:build race

package e2e

// raceDetector is true when the tests run under -race, which slows them
// several times: bounds on latency do not hold there.
const raceDetector = true
