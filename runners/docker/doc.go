// Package docker is the docker runner: a step in a container of a Docker daemon (specs, images, resources).
// It imports runners and the Docker client only, never another runner, the worker or client-go.
package docker
