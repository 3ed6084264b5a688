// Package enginetest is the orchestrator's test harness: a hand-driven
// clock, an in-memory store, a workspace map, a recording log sink and a
// fixture that drives a real engine like a worker would.
// It must not import net/http, bbolt, store, api, app or runners.
package enginetest
