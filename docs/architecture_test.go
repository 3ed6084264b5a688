package docs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// strict makes a rule that names a package the tree does not have a
// failure rather than a log line: `go test ./docs -strict`.
var strict = flag.Bool("strict", false, "fail when a rule in architecture.md names a package the tree does not have")

// architecturePage is the page whose tables are the import rules.
const architecturePage = "architecture.md"

// TestImportRules holds every non-test package of the module to the import
// rules of architecture.md, read from its tables:
//
//   - `| package | owns | must not import |`: a package the first cell
//     names must not import what the third names, directly or through
//     other packages of this module (a path through a third-party module
//     is that module's business: the S3 client may speak HTTP for store);
//   - `| import | imported only by | why |`: what the first cell names may
//     be imported directly only by the packages the second names.
//
// Every `backquoted` word of those cells is a pattern: a package of this
// module by its path in the repository (`engine/workflow`, `.` for main),
// anything else by its import path (`net/http`); `x/...` is x and every
// package below it.
func TestImportRules(t *testing.T) {
	page, err := os.ReadFile(architecturePage)
	if err != nil {
		t.Fatal(err)
	}
	bans, onlys, err := parseRules(page)
	if err != nil {
		t.Fatalf("%s: %v", architecturePage, err)
	}
	if len(bans) == 0 || len(onlys) == 0 {
		t.Fatalf("%s: found %d must-not-import rules and %d imported-only-by rules: the tables' headers must read "+
			"| package | owns | must not import | and | import | imported only by | why |", architecturePage, len(bans), len(onlys))
	}
	mod := loadModule(t, ".")

	for _, r := range bans {
		mod.checkNames(t, r.line, "the rule's package", r.pkgs)
		mod.checkNames(t, r.line, "a forbidden import", r.forbidden)
	}
	for _, r := range onlys {
		mod.checkNames(t, r.line, "the rule's import", r.imports)
		mod.checkNames(t, r.line, "an allowed importer", r.importers)
	}

	for _, v := range mod.violations(bans, onlys) {
		t.Error(v)
	}
}

// ban is one row of the must-not-import table.
type ban struct {
	line      int      // in architecture.md
	pkgs      []string // patterns of the packages it holds
	forbidden []string // patterns they must not import
}

// only is one row of the imported-only-by table.
type only struct {
	line      int
	imports   []string // patterns of what only some may import
	importers []string // patterns of those that may
}

var (
	banHeader  = []string{"package", "owns", "must not import"}
	onlyHeader = []string{"import", "imported only by", "why"}
	backquoted = regexp.MustCompile("`([^`]*)`")
)

// parseRules reads the rule tables of the page.
func parseRules(page []byte) ([]ban, []only, error) {
	var (
		bans  []ban
		onlys []only
		in    []string // header of the table being read, nil outside one
	)
	sc := bufio.NewScanner(bytes.NewReader(page))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			in = nil
			continue
		}
		cells := splitRow(line)
		if in == nil {
			switch {
			case slices.Equal(lower(cells), banHeader):
				in = banHeader
			case slices.Equal(lower(cells), onlyHeader):
				in = onlyHeader
			default:
				in = []string{} // another table: skipped
			}
			continue
		}
		if len(in) == 0 || isSeparator(cells) {
			continue
		}
		if len(cells) != len(in) {
			return nil, nil, fmt.Errorf("line %d: %d cells, want %d (%s)", n, len(cells), len(in), strings.Join(in, " | "))
		}
		isBan := slices.Equal(in, banHeader)
		ruleCell := cells[1] // imported only by
		if isBan {
			ruleCell = cells[2] // must not import
		}
		first, err := patterns(cells[0])
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", n, err)
		}
		last, err := patterns(ruleCell)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", n, err)
		}
		switch {
		case len(first) == 0:
			return nil, nil, fmt.Errorf("line %d: the first cell names nothing in `backquotes`", n)
		case isBan:
			bans = append(bans, ban{line: n, pkgs: first, forbidden: last})
		case len(last) == 0:
			return nil, nil, fmt.Errorf("line %d: names nobody who may import it", n)
		default:
			onlys = append(onlys, only{line: n, imports: first, importers: last})
		}
	}
	return bans, onlys, sc.Err()
}

func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

func lower(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = strings.ToLower(c)
	}
	return out
}

func isSeparator(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, ":-") != "" {
			return false
		}
	}
	return true
}

// patterns are the backquoted words of a cell; anything else in it is
// prose for the reader.
func patterns(cell string) ([]string, error) {
	var out []string
	for _, m := range backquoted.FindAllStringSubmatch(cell, -1) {
		p := m[1]
		if p == "" || strings.ContainsAny(p, " \t") {
			return nil, fmt.Errorf("`%s` is not a package pattern: a rule cell's backquoted words are import paths", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// module is what go list says of the module's non-test packages.
type module struct {
	path    string              // module path
	roots   map[string]bool     // its top-level directories
	imports map[string][]string // package (path in the repository) -> its imports (import paths)
	order   []string            // the packages, as go list lists them
}

// goPackage is the part of `go list -json` this test reads.
type goPackage struct {
	ImportPath string
	Imports    []string
	Error      *struct{ Err string }
}

// loadModule lists the packages of the module holding the directory from.
func loadModule(t *testing.T, from string) *module {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}}\t{{.Dir}}")
	cmd.Dir = from
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v%s", err, stderrOf(err))
	}
	path, dir, ok := strings.Cut(strings.TrimSpace(string(out)), "\t")
	if !ok {
		t.Fatalf("go list -m: unexpected answer %q", out)
	}
	m := &module{path: path, roots: map[string]bool{}, imports: map[string][]string{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			m.roots[e.Name()] = true
		}
	}
	cmd = exec.Command("go", "list", "-e", "-json", "./...")
	cmd.Dir = dir
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("go list -json ./...: %v%s", err, stderrOf(err))
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json ./...: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		rel := m.rel(p.ImportPath)
		m.imports[rel] = p.Imports
		m.order = append(m.order, rel)
	}
	if len(m.order) == 0 {
		t.Fatal("go list -json ./... listed no packages")
	}
	return m
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return "\n" + string(ee.Stderr)
	}
	return ""
}

// rel is an import path as the rules write it: a package of the module by
// its path in the repository ("." for the root), anything else as is.
func (m *module) rel(importPath string) string {
	if importPath == m.path {
		return "."
	}
	if r, ok := strings.CutPrefix(importPath, m.path+"/"); ok {
		return r
	}
	return importPath
}

// ours says whether a pattern names packages of this module: "." or a path
// under one of its top-level directories.
func (m *module) ours(pattern string) bool {
	first, _, _ := strings.Cut(pattern, "/")
	return pattern == "." || m.roots[first]
}

// match says whether the pattern names the package (as rel writes it).
func match(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func matchAny(patterns []string, pkg string) (string, bool) {
	for _, p := range patterns {
		if match(p, pkg) {
			return p, true
		}
	}
	return "", false
}

// checkNames reports the patterns of ours that name no package of the
// tree: a log line while the tree is being moved, a failure with -strict.
func (m *module) checkNames(t *testing.T, line int, what string, patterns []string) {
	t.Helper()
	for _, p := range patterns {
		if !m.ours(p) {
			continue
		}
		if slices.ContainsFunc(m.order, func(pkg string) bool { return match(p, pkg) }) {
			continue
		}
		msg := fmt.Sprintf("%s:%d: %s `%s` names no package in the tree", architecturePage, line, what, p)
		if *strict {
			t.Error(msg)
		} else {
			t.Log(msg + " (yet: run with -strict to make this a failure)")
		}
	}
}

// violations lists every import that breaks a rule, in go list's order of
// the packages: one message per package, rule and pattern, naming every
// import of the package the pattern catches.
func (m *module) violations(bans []ban, onlys []only) []string {
	var out []string
	for _, pkg := range m.order {
		for _, r := range bans {
			held, ok := matchAny(r.pkgs, pkg)
			if !ok {
				continue
			}
			var caught []string           // forbidden patterns, in the order first met
			found := map[string][]*step{} // pattern -> the imports it catches
			for _, imp := range m.reach(pkg) {
				if m.heldOnTheWay(r, imp) {
					continue // reported for the package on the way, nearer the cause
				}
				if forbidden, ok := matchAny(r.forbidden, m.rel(imp.path)); ok {
					if found[forbidden] == nil {
						caught = append(caught, forbidden)
					}
					found[forbidden] = append(found[forbidden], imp)
				}
			}
			for _, forbidden := range caught {
				imps := found[forbidden]
				out = append(out, fmt.Sprintf("%s imports %s, which the rule at %s:%d forbids (`%s` must not import `%s`): %s%s",
					pkg, m.rel(imps[0].path), architecturePage, r.line, held, forbidden, m.chain(pkg, imps[0]), more(m, imps[1:])))
			}
		}
		for _, r := range onlys {
			var imps []string
			for _, imp := range m.imports[pkg] {
				if _, ok := matchAny(r.imports, m.rel(imp)); ok {
					imps = append(imps, m.rel(imp))
				}
			}
			if len(imps) == 0 {
				continue
			}
			if _, ok := matchAny(r.importers, pkg); ok {
				continue
			}
			out = append(out, fmt.Sprintf("%s imports %s, which the rule at %s:%d forbids (%s may be imported only by %s)",
				pkg, strings.Join(imps, ", "), architecturePage, r.line, quoted(r.imports), quoted(r.importers)))
		}
	}
	return out
}

// heldOnTheWay says whether the path to imp passes through a package the
// rule also holds: that package breaks the rule itself.
func (m *module) heldOnTheWay(r ban, imp *step) bool {
	for s := imp.prev; s != nil; s = s.prev {
		if _, ok := matchAny(r.pkgs, m.rel(s.path)); ok {
			return true
		}
	}
	return false
}

// more names the other imports a pattern caught: "; also x, y".
func more(m *module, imps []*step) string {
	if len(imps) == 0 {
		return ""
	}
	names := make([]string, len(imps))
	for i, s := range imps {
		names[i] = m.rel(s.path)
	}
	return "; also " + strings.Join(names, ", ")
}

// step is an import reached from a package, with the import before it.
type step struct {
	path string // import path
	prev *step  // nil for a direct import
}

// reach lists what pkg imports, directly or through packages of this
// module, each once by its shortest path (breadth first).
func (m *module) reach(pkg string) []*step {
	seen := map[string]bool{m.join(pkg): true}
	var out []*step
	var queue []*step
	for _, imp := range m.imports[pkg] {
		queue = append(queue, &step{path: imp})
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if seen[s.path] {
			continue
		}
		seen[s.path] = true
		out = append(out, s)
		if rel := m.rel(s.path); rel != s.path { // a package of the module: go on through it
			for _, imp := range m.imports[rel] {
				queue = append(queue, &step{path: imp, prev: s})
			}
		}
	}
	return out
}

func (m *module) join(rel string) string {
	if rel == "." {
		return m.path
	}
	return m.path + "/" + rel
}

// chain is how pkg reaches an import: "imported directly", or "through
// engine → engine/workspace → github.com/goccy/go-yaml".
func (m *module) chain(pkg string, s *step) string {
	if s.prev == nil {
		return "imported directly"
	}
	var parts []string
	for ; s != nil; s = s.prev {
		parts = append(parts, m.rel(s.path))
	}
	parts = append(parts, pkg)
	slices.Reverse(parts)
	return "through " + strings.Join(parts, " → ")
}

func quoted(patterns []string) string {
	q := make([]string, len(patterns))
	for i, p := range patterns {
		q[i] = "`" + p + "`"
	}
	return strings.Join(q, ", ")
}

// TestParseRules checks the reading of the tables on a page of its own.
func TestParseRules(t *testing.T) {
	page := "# x\n\n" +
		"| Package | Owns | Must not import |\n" +
		"|---|---|---|\n" +
		"| `engine/...` | the loop | `net/http/...`, `store` |\n" +
		"| `ui` | the UI | — |\n" +
		"\n| other | table |\n|---|---|\n| `a` | `b` |\n\n" +
		"| import | imported only by | why |\n" +
		"|:--|:--|:--|\n" +
		"| `k8s.io/client-go/...` | `runners/pod/...` | pods only |\n"
	bans, onlys, err := parseRules([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	wantBans := []ban{
		{line: 5, pkgs: []string{"engine/..."}, forbidden: []string{"net/http/...", "store"}},
		{line: 6, pkgs: []string{"ui"}},
	}
	if !slices.EqualFunc(bans, wantBans, func(a, b ban) bool {
		return a.line == b.line && slices.Equal(a.pkgs, b.pkgs) && slices.Equal(a.forbidden, b.forbidden)
	}) {
		t.Errorf("bans = %+v, want %+v", bans, wantBans)
	}
	wantOnlys := []only{{line: 14, imports: []string{"k8s.io/client-go/..."}, importers: []string{"runners/pod/..."}}}
	if !slices.EqualFunc(onlys, wantOnlys, func(a, b only) bool {
		return a.line == b.line && slices.Equal(a.imports, b.imports) && slices.Equal(a.importers, b.importers)
	}) {
		t.Errorf("onlys = %+v, want %+v", onlys, wantOnlys)
	}

	for _, bad := range []string{
		"| package | owns | must not import |\n|---|---|---|\n| `x` | y | `not a path` |\n",
		"| package | owns | must not import |\n|---|---|---|\n| x | y | `z` |\n",
		"| package | owns | must not import |\n|---|---|---|\n| `x` | y |\n",
		"| import | imported only by | why |\n|---|---|---|\n| `x` | nobody | y |\n",
	} {
		if _, _, err := parseRules([]byte(bad)); err == nil {
			t.Errorf("parseRules(%q) took it", bad)
		}
	}
}

// TestMatch checks the patterns' meaning.
func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"engine", "engine", true},
		{"engine", "engine/workflow", false},
		{"engine/...", "engine", true},
		{"engine/...", "engine/workflow", true},
		{"engine/...", "engineering", false},
		{"net/http/...", "net/http/httptest", true},
		{"go.etcd.io/bbolt/...", "go.etcd.io/bbolt", true},
		{".", ".", true},
	} {
		if got := match(c.pattern, c.pkg); got != c.want {
			t.Errorf("match(%q, %q) = %v, want %v", c.pattern, c.pkg, got, c.want)
		}
	}
}

// TestImportRulesOnAFixture checks the rules against a module made to break
// them (testdata/layout): a forbidden import reached through the module's
// own packages is caught with its path, once, for the package nearest the
// cause (engine/workflow, not engine, which reaches it through that one),
// and an imported-only-by rule catches a direct import.
func TestImportRulesOnAFixture(t *testing.T) {
	page := "| package | owns | must not import |\n|---|---|---|\n" +
		"| `engine/...` | the engine | `net/http/...`, `api/...` |\n" +
		"| `api` | the api | `store` |\n" +
		"\n| import | imported only by | why |\n|---|---|---|\n" +
		"| `app/...` | `.`, `app/...` | the wiring's |\n"
	bans, onlys, err := parseRules([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	mod := loadModule(t, filepath.Join("testdata", "layout"))
	got := mod.violations(bans, onlys)
	want := []string{
		"api imports app/wiring, which the rule at architecture.md:8 forbids (`app/...` may be imported only by `.`, `app/...`)",
		"engine/workflow imports net/http, which the rule at architecture.md:3 forbids (`engine/...` must not import `net/http/...`): through engine/workflow → helper → net/http",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
