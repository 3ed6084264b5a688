package workspace

import _ "embed"

//go:embed schema.json
var schemaJSON []byte

// JSONSchema returns a JSON Schema (draft 2020-12) of the workflow file
// format, for editors validating .workflows/*.yaml.
func JSONSchema() []byte {
	return append([]byte(nil), schemaJSON...)
}
