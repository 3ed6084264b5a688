// Package pod is the pod runner: a step as a Kubernetes pod, and what its init container prepares (PodInit).
// The one package importing client-go; it imports runners and the worker's client, never another runner.
package pod
