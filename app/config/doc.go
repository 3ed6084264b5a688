// Package config is the schema of server-config.yaml and worker-config.yaml:
// decoding (with ${ENV} expansion), defaults and validation. It builds no
// component; app wires the server and the worker from what it returns.
package config
