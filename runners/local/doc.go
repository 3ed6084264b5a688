// Package local is the local runner: a step as a process group on this machine (interpreters, dependencies, the step keeper).
// It imports runners only, never another runner, the worker, client-go or the Docker client.
package local
