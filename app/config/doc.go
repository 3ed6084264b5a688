// Package config is the schema of server-config.yaml and worker-config.yaml:
// decoding (with ${ENV} expansion), defaults and validation. It builds no
// component; app wires the server and the worker from what it returns.
// It imports the packages whose settings it decodes, and must not import
// app, app/cli, app/e2e, api or api/dispatch.
package config
