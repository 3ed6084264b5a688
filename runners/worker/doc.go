// Package worker is the process that runs steps: its loop, the protocol Server and its HTTP client, spool, journals, delivery, workspace cache.
// It imports runners and the local runner (every worker has it), never docker, pod, client-go, the engine or the api.
package worker
