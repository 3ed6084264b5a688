package app

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/goccy/go-yaml"
)

// envRef matches ${NAME} in configuration files.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// decodeConfigFile reads a YAML configuration file into out: ${ENV}
// references are expanded first, and unknown keys or wrong types are errors
// naming the file, line and column.
func decodeConfigFile(path string, out any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	expanded := envRef.ReplaceAllFunc(raw, func(m []byte) []byte {
		return []byte(os.Getenv(string(envRef.FindSubmatch(m)[1])))
	})
	if len(bytes.TrimSpace(expanded)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(expanded), yaml.DisallowUnknownField())
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s:%s", path, configErrorText(err))
	}
	return nil
}

// configErrorText renders a decoding error as "line:col: message".
func configErrorText(err error) string {
	var perr *positionedError
	if errors.As(err, &perr) {
		return perr.Error()
	}
	var yerr yaml.Error
	if errors.As(err, &yerr) {
		if tok := yerr.GetToken(); tok != nil && tok.Position != nil {
			return fmt.Sprintf("%d:%d: %s", tok.Position.Line, tok.Position.Column, yerr.GetMessage())
		}
		return " " + yerr.GetMessage()
	}
	return " " + err.Error()
}
