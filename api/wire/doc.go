// Package wire holds the JSON types of the public HTTP API: the bodies the
// handlers decode and the answers they encode, which the Go client
// (api/client), the CLI and the tests decode. It is a leaf: it imports no
// server code (echo, the engine); api converts engine records to these.
package wire
