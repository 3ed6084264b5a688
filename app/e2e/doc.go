// Package e2e holds the system, browser and crash suites: real servers
// (app.Start) and the built binary, driven over HTTP, the CLI and Chromium.
// It is tests only, kept apart from the wiring; nothing imports it.
package e2e
