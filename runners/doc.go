// Package runners owns the Runner interface, the Registry choosing a runner by name and tag, and the step plumbing runners share (Execute, lines, env, container layout).
// It must not import its runners (local, docker, pod, agent), the worker, client-go or the Docker client: they import it.
package runners
