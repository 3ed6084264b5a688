package local

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tsNode is the node program that runs a TypeScript file when tsc (the
// TypeScript package, as Debian's node-typescript installs it) is the
// interpreter: it transpiles the file in memory with the package's
// single-file transpiler (types stripped, not checked, as bun and deno do;
// a syntax error exits 1 naming its line) and runs the result as the main
// CommonJS module, so node's own process, working directory, environment,
// exit code and NODE_PATH (dependencies) apply unchanged.
//
//go:embed tsnode.js
var tsNode string

// isTsc tells whether the interpreter at path is the TypeScript compiler.
func isTsc(path string) bool {
	return strings.TrimSuffix(filepath.Base(path), ".exe") == "tsc"
}

// tscArgs is the command line running file with node and the TypeScript
// package tsc belongs to; shown names the script in transpile errors.
func (l *Runner) tscArgs(tsc, file, shown string) ([]string, error) {
	node, err := l.cfg.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("typescript: %s only transpiles, and node, which runs the result, is not found", tsc)
	}
	pkg, err := typescriptPackage(tsc)
	if err != nil {
		return nil, err
	}
	return []string{node, "-e", tsNode, "--", pkg, file, shown}, nil
}

// typescriptPackage is the directory of the typescript package whose
// bin/tsc is (a link to) tsc: /usr/share/nodejs/typescript for Debian's
// node-typescript, <prefix>/lib/node_modules/typescript for npm -g.
func typescriptPackage(tsc string) (string, error) {
	real, err := filepath.EvalSymlinks(tsc)
	if err != nil {
		return "", fmt.Errorf("typescript: %s: %w", tsc, err)
	}
	pkg := filepath.Dir(filepath.Dir(real))
	if _, err := os.Stat(filepath.Join(pkg, "package.json")); err != nil {
		return "", fmt.Errorf("typescript: %s is not the bin/tsc of a typescript package (no %s)", tsc, filepath.Join(pkg, "package.json"))
	}
	return pkg, nil
}
