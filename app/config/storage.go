package config

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// The values of storage.type.
const (
	StorageBbolt    = "bbolt"
	StoragePostgres = "postgres"
)

// DefaultMaxConns is storage.max_conns when unset: the PostgreSQL pool's
// size (store/postgres has the same default for a Config without one).
const DefaultMaxConns = 10

// Storage is the storage section: where the server keeps its state.
//
//	storage:
//	  type: postgres                      # bbolt (default) | postgres
//	  dsn: ${APPLIANCE_DATABASE_URL}      # postgres only
//	  max_conns: 10                       # postgres only
//
// bbolt keeps it in data_dir/appliance.db and needs nothing set; postgres
// keeps it in one PostgreSQL database, for a team that needs replication,
// backups or a second server.
type Storage struct {
	Type     string `yaml:"type"`
	DSN      string `yaml:"dsn"`
	MaxConns int    `yaml:"max_conns"`
}

// storageFields is the section as written, decoded strictly; set records
// which keys the file has, to refuse max_conns: 0 rather than default it.
type storageFields Storage

// UnmarshalYAML decodes the section and checks it, each error at the line
// and column of the value at fault: a server that cannot reach its
// database must not quietly start on a bbolt file instead, so every
// mistake here is refused rather than defaulted.
func (s *Storage) UnmarshalYAML(node ast.Node) error {
	var f storageFields
	if err := yaml.NodeToValue(node, &f, yaml.DisallowUnknownField()); err != nil {
		return err
	}
	f.Type = strings.TrimSpace(f.Type)
	f.DSN = strings.TrimSpace(f.DSN)
	switch f.Type {
	case "":
		if mappingValue(node, "type") != nil {
			return errorAt(valueAt(node, "type"), "storage.type: empty; want %s (the default) or %s", StorageBbolt, StoragePostgres)
		}
		f.Type = StorageBbolt
	case StorageBbolt, StoragePostgres:
	default:
		return errorAt(valueAt(node, "type"), "storage.type: unknown type %q; want %s (the default) or %s", f.Type, StorageBbolt, StoragePostgres)
	}
	switch {
	case f.Type == StoragePostgres && f.DSN == "":
		where := valueAt(node, "type") // the postgres that asks for one
		if mappingValue(node, "dsn") != nil {
			where = valueAt(node, "dsn")
		}
		return errorAt(where, "storage.dsn: required with type postgres: a PostgreSQL URL such as "+
			"postgres://appliance@db.example.com:5432/appliance, usually written as ${APPLIANCE_DATABASE_URL}")
	case f.Type == StorageBbolt && f.DSN != "":
		return errorAt(valueAt(node, "dsn"), "storage.dsn: set, but storage.type is bbolt; write type: postgres to use PostgreSQL")
	case f.Type == StorageBbolt && mappingValue(node, "max_conns") != nil:
		return errorAt(valueAt(node, "max_conns"), "storage.max_conns: a PostgreSQL setting, but storage.type is bbolt")
	}
	if mappingValue(node, "max_conns") == nil {
		f.MaxConns = 0
	} else if f.MaxConns < 1 {
		return errorAt(valueAt(node, "max_conns"), "storage.max_conns: must be 1 or more, got %d", f.MaxConns)
	}
	*s = Storage(f)
	return nil
}

// valueAt is where an error about key belongs: its value, else the
// section itself (the key is missing).
func valueAt(node ast.Node, key string) ast.Node {
	if v := mappingValue(node, key); v != nil {
		return v
	}
	return node
}

// mappingValue is the value node of key in a mapping node, nil when the
// mapping lacks it (or node is no mapping).
func mappingValue(node ast.Node, key string) ast.Node {
	m, ok := node.(*ast.MappingNode)
	if !ok {
		if v, ok := node.(*ast.MappingValueNode); ok {
			m = &ast.MappingNode{Values: []*ast.MappingValueNode{v}}
		} else {
			return nil
		}
	}
	for _, v := range m.Values {
		if v.Key != nil && v.Key.String() == key {
			return v.Value
		}
	}
	return nil
}

// Postgres says whether the state lives in PostgreSQL.
func (s Storage) Postgres() bool { return s.Type == StoragePostgres }

// EffectiveMaxConns is max_conns, or its default.
func (s Storage) EffectiveMaxConns() int {
	if s.MaxConns > 0 {
		return s.MaxConns
	}
	return DefaultMaxConns
}

// Describe is the start-up line of the section; it never shows the DSN,
// which may hold a password.
func (s Storage) Describe(dbPath string) string {
	if s.Postgres() {
		return fmt.Sprintf("postgres (pool of %d connections)", s.EffectiveMaxConns())
	}
	return "bbolt, " + dbPath
}
