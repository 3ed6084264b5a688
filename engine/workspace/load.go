// Package workspace loads and validates workspaces: it decodes the YAML
// workflow format into the engine/workflow model, checks it, packs and
// watches workspace directories and keeps their revisions (Registry).
// It must not import engine (a client of the loader, never the reverse),
// net/http, store, api, app or runners.
package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// WorkflowDir is the folder of a workspace that holds its workflow files.
const WorkflowDir = ".workflows"

// LoadOptions are checks that depend on the server loading the workspace.
type LoadOptions struct {
	// Providers are the agent provider ids the server knows: an agent
	// action naming another is a load error. nil = not checked (the CLI's
	// validate, a server with no agents configured).
	Providers []string
	// Queues are the queue names of the server config (`queues`): a task
	// joining another is a load error. nil = not checked (the CLI's
	// validate).
	Queues []string
}

// loader carries one Load: the workspace being built and every problem found.
type loader struct {
	opts     LoadOptions
	env      map[string]string
	ws       *workflow.Workspace
	errs     workflow.Errors
	reported map[string]bool
	shipped  map[string]bool
	// nodes remembers every decoded node by path, so that checks made
	// after decoding (references, cycles) can point at the right place.
	nodes map[string]node
	// defined remembers where each named thing was first defined, to
	// report duplicates across files.
	defined map[string]pos
	// raw holds the top-level sections of every file until all are read,
	// because a section may refer to things defined in another file.
	raw map[string][]mapEntry
	// hooks holds the workspace-level hook lists of every file.
	hooks map[string][]node
}

// addErr records a problem once: a node read twice (as a value and for its
// templates) must not report the same problem twice.
func (l *loader) addErr(p pos, path, msg string) {
	e := &workflow.Error{File: p.file, Line: p.line, Col: p.col, Path: path, Msg: msg}
	key := e.Error()
	if l.reported[key] {
		return
	}
	l.reported[key] = true
	l.errs = append(l.errs, e)
}

// errAt reports msg at the node recorded for path, or at its nearest
// recorded parent.
func (l *loader) errAt(path, msg string) {
	for p := path; p != ""; {
		if n, ok := l.nodes[p]; ok {
			l.addErr(n.pos(), displayPath(path), msg)
			return
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	l.addErr(pos{}, displayPath(path), msg)
}

// errAtHead reports msg about the thing at path as a whole, at its key.
func (l *loader) errAtHead(path, msg string) {
	if n, ok := l.nodes[path]; ok {
		l.addErr(n.headPos(), displayPath(path), msg)
		return
	}
	l.errAt(path, msg)
}

// displayPath drops list indexes: people read "depends_on", not "depends_on[1]".
func displayPath(p string) string {
	if !strings.HasSuffix(p, "]") {
		return p
	}
	if i := strings.LastIndexByte(p, '['); i > 0 {
		return p[:i]
	}
	return p
}

// Load reads and validates the workspace in dir. env supplies `env.*` for
// the secrets block (nil = the process environment). A workspace with
// problems returns Errors listing all of them.
func Load(name, dir string, env map[string]string) (*workflow.Workspace, error) {
	return LoadWith(name, dir, env, LoadOptions{})
}

// LoadWith is Load with the server's checks.
func LoadWith(name, dir string, env map[string]string, opts LoadOptions) (*workflow.Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("load workspace %s: %w", name, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("load workspace %s: %w", name, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("load workspace %s: %s is not a directory", name, dir)
	}
	files, err := ShippedFiles(abs)
	if err != nil {
		return nil, fmt.Errorf("load workspace %s: %w", name, err)
	}
	rev, err := revision(abs, files)
	if err != nil {
		return nil, fmt.Errorf("load workspace %s: %w", name, err)
	}
	if env == nil {
		env = processEnv()
	}
	l := &loader{
		opts: opts,
		env:  env,
		ws: &workflow.Workspace{
			Name:            name,
			Dir:             abs,
			Revision:        rev,
			Secrets:         map[string]string{},
			ConnectionTypes: map[string]*workflow.ConnectionType{},
			Connections:     map[string]*workflow.Connection{},
			Actions:         map[string]*workflow.Action{},
			Tasks:           map[string]*workflow.Task{},
			Triggers:        map[string]*workflow.Trigger{},
			Templates:       template.NewSet(),
		},
		reported: map[string]bool{},
		shipped:  make(map[string]bool, len(files)),
		nodes:    map[string]node{},
		defined:  map[string]pos{},
		raw:      map[string][]mapEntry{},
		hooks:    map[string][]node{},
	}
	var workflows []string
	for _, f := range files {
		l.shipped[f] = true
		if isWorkflowFile(f) {
			workflows = append(workflows, f)
		}
	}
	if len(workflows) == 0 {
		l.addErr(pos{file: WorkflowDir}, "", "no workflow files found (expected .workflows/*.yaml or *.yml)")
	}
	for _, f := range workflows {
		data, err := os.ReadFile(filepath.Join(abs, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("load workspace %s: %w", name, err)
		}
		l.readFile(f, data)
	}
	l.decodeSections()
	l.validate()
	if len(l.errs) > 0 {
		sortErrors(l.errs)
		l.noteFileTasks()
		return nil, l.errs
	}
	return l.ws, nil
}

// noteFileTasks says, on each problem, which tasks its file defines: who
// may read the problem depends on them (see Error.Tasks).
func (l *loader) noteFileTasks() {
	tasks := map[string][]string{}
	for id, p := range l.defined {
		name, ok := strings.CutPrefix(id, "tasks.")
		if !ok {
			continue
		}
		path := "" // a task that did not decode has no known folder
		if t := l.ws.Tasks[name]; t != nil {
			path = workflow.TaskPath(t.Folder, name)
		}
		tasks[p.file] = append(tasks[p.file], path)
	}
	for _, e := range l.errs {
		e.Tasks = tasks[e.File]
	}
}

func isWorkflowFile(rel string) bool {
	if !strings.HasPrefix(rel, WorkflowDir+"/") {
		return false
	}
	ext := path.Ext(rel)
	return ext == ".yaml" || ext == ".yml"
}

func processEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// sortErrors orders problems as a person reads them: by file, then position.
func sortErrors(es workflow.Errors) {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// readFile parses one workflow file and collects its top-level sections.
func (l *loader) readFile(name string, data []byte) {
	f, err := parseYAML(data)
	if err != nil {
		l.addErr(syntaxPos(name, err), "", syntaxMessage(err))
		return
	}
	ctx := &fileCtx{l: l, name: name, anchors: map[string]ast.Node{}}
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		collectAnchors(ctx, doc.Body)
		l.readDocument(node{n: doc.Body, f: ctx})
	}
}

// parseYAML parses a file into its AST. The parser is third-party code fed
// with user input; a panic in it becomes an error in that file.
func parseYAML(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed: %v", r)
		}
	}()
	return parser.ParseBytes(data, 0)
}

// collectAnchors records every anchor of a document so aliases resolve.
func collectAnchors(ctx *fileCtx, body ast.Node) {
	for _, n := range ast.Filter(ast.AnchorType, body) {
		a, ok := n.(*ast.AnchorNode)
		if !ok || a.Name == nil || a.Name.GetToken() == nil {
			continue
		}
		ctx.anchors[a.Name.GetToken().Value] = a.Value
	}
}

// syntaxPos and syntaxMessage turn a parser error into file:line:col and
// its one-line message, without the source excerpt the library appends.
func syntaxPos(file string, err error) pos {
	p := pos{file: file}
	var yerr yaml.Error
	if errors.As(err, &yerr) {
		if tk := yerr.GetToken(); tk != nil && tk.Position != nil {
			p.line, p.col = tk.Position.Line, tk.Position.Column
		}
	}
	return p
}

func syntaxMessage(err error) string {
	var yerr yaml.Error
	if errors.As(err, &yerr) {
		return "syntax error: " + yerr.GetMessage()
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return "syntax error: " + msg
}

// topKeys are the sections of a workflow file.
var topKeys = set("secrets", "connection_types", "connections", "actions", "tasks", "triggers", "on_success", "on_error")

// sectionNoun names one item of a section in messages.
var sectionNoun = map[string]string{
	"secrets":          "secret",
	"connection_types": "connection type",
	"connections":      "connection",
	"actions":          "action",
	"tasks":            "task",
	"triggers":         "trigger",
}

func (l *loader) readDocument(doc node) {
	top, ok := doc.object(topKeys)
	if !ok {
		return
	}
	for _, key := range top.keys {
		v, _ := top.get(key)
		if key == "on_success" || key == "on_error" {
			l.hooks[key] = append(l.hooks[key], v)
			continue
		}
		es, _ := v.mapping()
		for _, e := range es {
			id := key + "." + e.key
			if prev, dup := l.defined[id]; dup {
				e.k.errorf("duplicate %s %q: also defined at %s", sectionNoun[key], e.key, prev.String())
				continue
			}
			l.defined[id] = e.k.pos()
			l.raw[key] = append(l.raw[key], e)
		}
	}
}

func (p pos) String() string {
	if p.line == 0 {
		return p.file
	}
	return fmt.Sprintf("%s:%d:%d", p.file, p.line, p.col)
}

// revision hashes the shipped files: their paths and contents.
func revision(dir string, files []string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00", f)
		if err := hashFile(h, filepath.Join(dir, filepath.FromSlash(f))); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

func hashFile(w io.Writer, p string) error {
	fh, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("hash workspace file: %w", err)
	}
	defer fh.Close()
	// The length keeps "ab"+"c" and "a"+"bc" apart.
	fi, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("hash workspace file: %w", err)
	}
	fmt.Fprintf(w, "%d\x00", fi.Size())
	if _, err := io.Copy(w, fh); err != nil {
		return fmt.Errorf("hash workspace file: %w", err)
	}
	return nil
}

// vcsDirs are never shipped to workers.
var vcsDirs = map[string]bool{".git": true, ".hg": true, ".svn": true, ".bzr": true, ".jj": true, "_darcs": true}

// ShippedFiles lists the files a workspace ships to workers (relative,
// slash-separated, sorted): everything under dir except VCS metadata. The
// revision hashes exactly these files; the worker tarball holds exactly them.
// Symbolic links are followed only while they stay inside dir.
func ShippedFiles(dir string) ([]string, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("list workspace files: %w", err)
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("list workspace files: %w", err)
	}
	var out []string
	if err := walkShipped(root, root, "", map[string]bool{root: true}, &out); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// walkShipped lists real directory realDir under the relative name rel.
// active holds the real paths of the directories being walked, so a link
// back to one of them cannot loop.
func walkShipped(root, realDir, rel string, active map[string]bool, out *[]string) error {
	entries, err := os.ReadDir(realDir)
	if err != nil {
		return fmt.Errorf("list workspace files: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		relName := path.Join(rel, name)
		full := filepath.Join(realDir, name)
		mode := e.Type()
		if mode&os.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(full)
			if err != nil || !within(root, target) {
				continue // dangling, or leaves the workspace
			}
			fi, err := os.Stat(target)
			if err != nil {
				continue
			}
			full, mode = target, fi.Mode().Type()
		}
		switch {
		case mode.IsDir():
			if vcsDirs[name] || active[full] {
				continue
			}
			active[full] = true
			err := walkShipped(root, full, relName, active, out)
			delete(active, full)
			if err != nil {
				return err
			}
		case mode.IsRegular():
			*out = append(*out, relName)
		}
	}
	return nil
}

func within(root, p string) bool {
	r, err := filepath.Rel(root, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}
