package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// decodeConfigFile reads a YAML configuration file into out: ${ENV}
// references in its values are expanded after parsing (see expandEnv), and
// unknown keys or wrong types are errors naming the file, line and column.
func decodeConfigFile(path string, out any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	protected, refs := protectEnvRefs(raw)
	file, err := parser.ParseBytes(protected, 0)
	if err != nil {
		return fmt.Errorf("%s:%s", path, configErrorText(err, refs))
	}
	if len(file.Docs) == 0 {
		return nil
	}
	if len(file.Docs) > 1 {
		return fmt.Errorf("%s: a config file holds one YAML document, this one has %d", path, len(file.Docs))
	}
	body, err := refs.expandEnv(file.Docs[0].Body)
	if err != nil {
		return fmt.Errorf("%s:%w", path, err)
	}
	switch body.(type) {
	case nil, *ast.CommentGroupNode:
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(nil), yaml.DisallowUnknownField())
	if err := dec.DecodeFromNode(body, out); err != nil {
		return fmt.Errorf("%s:%s", path, configErrorText(err, refs))
	}
	return nil
}

// configErrorText renders a decoding error as "line:col: message", the
// position in the file as written, and messages quoting a value with its
// references as written.
func configErrorText(err error, refs envRefs) string {
	var perr *positionedError
	if errors.As(err, &perr) {
		return perr.Error()
	}
	var yerr yaml.Error
	if errors.As(err, &yerr) {
		msg := refs.restore(yerr.GetMessage())
		if tok := yerr.GetToken(); tok != nil && tok.Position != nil {
			return fmt.Sprintf("%d:%d: %s", tok.Position.Line, refs.fileCol(tok.Position.Line, tok.Position.Column), msg)
		}
		return " " + msg
	}
	return " " + refs.restore(err.Error())
}
