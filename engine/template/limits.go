package template

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Limits bound one render. Zero fields are unbounded.
//
// gonja cannot be interrupted, so the limits are checked from inside the
// render: Output by the writer the text goes to, by every {{ }} (macro and
// `set` block bodies included), by every string or list an operator or a
// filter builds, and before a string product or a padding filter allocates;
// Time by every loop iteration, operator and filter, through the deadline
// of the context the render runs with (WithLimits does not set one: the
// caller does, so that it can also give up waiting for a render that is
// stuck in one long step).
type Limits struct {
	Time   time.Duration // wall time of one render: the caller's deadline, named in errors
	Output int           // bytes one render may produce; also the largest string or list it may build
}

// ErrLimit is wrapped by every *LimitError.
var ErrLimit = errors.New("template limit exceeded")

// LimitError says which limit a render went past, in the server config's
// words: `template exceeded limits.template_time (2s)`.
type LimitError struct {
	Key   string // "template_time" or "template_output"
	Value string // the configured value, e.g. "2s", "1MB"
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("template exceeded limits.%s (%s)", e.Key, e.Value)
}

// Unwrap makes errors.Is(err, ErrLimit) hold.
func (e *LimitError) Unwrap() error { return ErrLimit }

// TimeLimitError is the error of a render that ran past lim.Time.
func TimeLimitError(lim Limits) *LimitError {
	return &LimitError{Key: "template_time", Value: lim.Time.String()}
}

// OutputLimitError is the error of a render that produced more than lim.Output.
func OutputLimitError(lim Limits) *LimitError {
	return &LimitError{Key: "template_output", Value: formatBytes(lim.Output)}
}

// formatBytes writes a byte count the way the config reads it (1MB, 64KB),
// or as "100 bytes" when it is no whole unit.
func formatBytes(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

type limitsKey struct{}

// WithLimits returns a context whose renders are bound by lim (Output at
// once; Time through ctx's deadline, which the caller sets).
func WithLimits(ctx context.Context, lim Limits) context.Context {
	return context.WithValue(ctx, limitsKey{}, lim)
}

func limitsOf(ctx context.Context) Limits {
	lim, _ := ctx.Value(limitsKey{}).(Limits)
	return lim
}

// budgetVar is the variable a render's budget travels under, so that the
// guard filters can find it through gonja's context. A template cannot
// name it: it is not an identifier.
const budgetVar = "appliance budget"

// budget is one render's account. A render runs on one goroutine, so it
// needs no lock.
type budget struct {
	ctx     context.Context
	lim     Limits
	start   time.Time
	checks  int    // alive calls, to look at the clock only now and then
	built   int    // bytes of text made by {{ }} and loop bodies, wherever they went
	tripped error  // the first limit passed: gonja flattens errors from filters into text
	marks   *marks // set when rendering a script: its {{ }} values (see RenderScript)
	// vars are the render's variables: a failure's message is scrubbed of
	// their values (see scrubValues).
	vars map[string]any
}

func newBudget(ctx context.Context) *budget {
	if ctx == nil {
		ctx = context.Background()
	}
	return &budget{ctx: ctx, lim: limitsOf(ctx), start: time.Now()}
}

// A render still running after slowRender is a bomb or close to one: from
// then on it sleeps slowPause every slowEvery checks (a check costs about
// a microsecond), which leaves it about a tenth of a CPU. It runs out its
// time all the same, but light renders, the orchestrator and the workers
// keep the CPUs and the garbage collector keeps up.
const (
	slowRender = 50 * time.Millisecond
	slowEvery  = 1024
	slowPause  = 10 * time.Millisecond
)

// budgetOf finds the render's budget; templates evaluated some other way
// (none today) have none and go unchecked.
func budgetOf(e *exec.Evaluator) *budget {
	if e == nil || e.Environment == nil || e.Environment.Context == nil {
		return nil
	}
	v, _ := e.Environment.Context.Get(budgetVar)
	b, _ := v.(*budget)
	return b
}

// alive fails once the render's context has ended.
func (b *budget) alive() error {
	if b.tripped != nil {
		return b.tripped
	}
	if b.checks++; b.checks%slowEvery == 0 && time.Since(b.start) > slowRender {
		time.Sleep(slowPause)
	}
	if err := b.ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return b.trip(TimeLimitError(b.lim))
		}
		return b.trip(fmt.Errorf("render abandoned: %w", err))
	}
	return nil
}

// fits fails when one value of n bytes (or items) is over the output limit.
func (b *budget) fits(n int) error {
	if b.lim.Output > 0 && n > b.lim.Output {
		return b.trip(OutputLimitError(b.lim))
	}
	return nil
}

// trip records the first limit the render passed: that is the render's
// error, whatever gonja made of it on the way up.
func (b *budget) trip(err error) error {
	if b.tripped == nil {
		b.tripped = err
	}
	return err
}

// build counts n more bytes of text made.
func (b *budget) build(n int) error {
	b.built += n
	return b.fits(b.built)
}

// value checks the size of a value an operator or a filter built.
func (b *budget) value(v *exec.Value) error {
	if err := b.alive(); err != nil {
		return err
	}
	if v == nil || b.lim.Output <= 0 {
		return nil
	}
	rv := v.Val
	for rv.IsValid() && (rv.Kind() == reflect.Interface || rv.Kind() == reflect.Pointer) {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.String:
		return b.fits(rv.Len())
	case reflect.Slice, reflect.Array, reflect.Map:
		// As many items as range may yield: a list's items cost far more
		// than a byte each.
		if rv.Len() > maxRange {
			return b.trip(OutputLimitError(b.lim))
		}
	}
	return nil
}

// failure is a failed render's error: the limit it passed, if any, else
// what gonja said.
func (b *budget) failure(src string, err error) error {
	if b.tripped != nil {
		return fmt.Errorf("template %s: %w", quote(src), b.tripped)
	}
	return scrubValues(templateError(src, err), b.vars)
}

// limitedWriter is where a render's text goes: it refuses to grow past the
// output limit and stops the render once its time is up.
type limitedWriter struct {
	b   *budget
	buf strings.Builder
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if err := w.check(len(p)); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

func (w *limitedWriter) WriteString(s string) (int, error) {
	if err := w.check(len(s)); err != nil {
		return 0, err
	}
	return w.buf.WriteString(s)
}

func (w *limitedWriter) check(n int) error {
	if err := w.b.alive(); err != nil {
		return err
	}
	return w.b.fits(w.buf.Len() + n)
}

// Names of the guard filters the parsed tree calls (see guard in ast.go).
// Templates cannot call them by these names: they are not identifiers.
const (
	tickFilter    = "appliance tick"
	productFilter = "appliance product"
	sizeFilter    = "appliance size"
	aliveFilter   = "appliance alive"
)

func guardFilters() map[string]exec.FilterFunction {
	return map[string]exec.FilterFunction{
		tickFilter:    filterTick,
		productFilter: filterProduct,
		sizeFilter:    filterSize,
		aliveFilter:   filterAlive,
	}
}

// filterAlive passes its input through while the render's time lasts,
// and is false after: gonja's error path is slow (a stack trace per
// error), and a false condition drops the item at once. The render fails
// all the same, at the next tick or when it returns (budget.tripped).
func filterAlive(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if b := budgetOf(e); b != nil && b.alive() != nil {
		return exec.AsValue(false)
	}
	return in
}

// filterTick runs first in every loop iteration: it stops a render whose
// time is up, and counts the literal text the iteration writes (its one
// argument), which no {{ }} sees.
func filterTick(e *exec.Evaluator, _ *exec.Value, params *exec.VarArgs) *exec.Value {
	b := budgetOf(e)
	if b == nil {
		return exec.AsSafeValue("")
	}
	if err := b.alive(); err != nil {
		return exec.AsValue(err)
	}
	if len(params.Args) == 1 {
		if err := b.build(params.Args[0].Integer()); err != nil {
			return exec.AsValue(err)
		}
	}
	return exec.AsSafeValue("")
}

// filterProduct is gonja's `left * right` with the size of a string product
// checked before it is allocated.
func filterProduct(e *exec.Evaluator, left *exec.Value, params *exec.VarArgs) *exec.Value {
	if left.IsError() {
		return left
	}
	if len(params.Args) != 1 {
		return exec.AsValue(errors.New("product needs two operands"))
	}
	right := params.Args[0]
	switch {
	case left.IsFloat() || right.IsFloat():
		return exec.AsValue(left.Float() * right.Float())
	case left.IsString():
		s, n := left.String(), right.Integer()
		if n < 0 {
			return exec.AsValue(errors.New("negative repeat count"))
		}
		if n == 0 || s == "" {
			return exec.AsValue("")
		}
		if b := budgetOf(e); b != nil {
			if err := b.alive(); err != nil {
				return exec.AsValue(err)
			}
			if b.lim.Output > 0 && n > b.lim.Output/len(s) {
				return exec.AsValue(b.trip(OutputLimitError(b.lim)))
			}
		}
		return exec.AsValue(strings.Repeat(s, n))
	}
	return exec.AsValue(left.Integer() * right.Integer())
}

// filterSize checks what an operator built (`+`, `~`).
func filterSize(e *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if b := budgetOf(e); b != nil {
		if err := b.value(in); err != nil {
			return exec.AsValue(err)
		}
	}
	return in
}

// guarded checks a filter's result the way filterSize checks an operator's,
// after refusing arguments that would make it allocate past the output
// limit first (padding widths, replacements).
func guarded(name string, fn exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		b := budgetOf(e)
		if b == nil {
			return fn(e, in, params)
		}
		if err := b.alive(); err != nil {
			return exec.AsValue(err)
		}
		if err := b.precheck(name, in, params); err != nil {
			return exec.AsValue(err)
		}
		out := fn(e, in, params)
		if out == nil || out.IsError() {
			return out
		}
		if err := b.value(out); err != nil {
			return exec.AsValue(err)
		}
		return out
	}
}

// precheck bounds what the filters that can multiply their input's size
// would allocate.
func (b *budget) precheck(name string, in *exec.Value, params *exec.VarArgs) error {
	if b.lim.Output <= 0 {
		return nil
	}
	arg := func(i int, kw string) *exec.Value {
		if v, ok := params.KwArgs[kw]; ok {
			return v
		}
		if i < len(params.Args) {
			return params.Args[i]
		}
		return nil
	}
	switch name {
	case "center", "indent", "truncate", "wordwrap":
		if w := arg(0, "width"); w != nil && w.IsInteger() {
			return b.fits(w.Integer())
		}
	case "replace":
		old, repl := arg(0, "old"), arg(1, "new")
		if old == nil || repl == nil {
			return nil
		}
		s := in.String()
		n := len(s) + 1 // an empty old matches between every byte
		if o := old.String(); o != "" {
			n = strings.Count(s, o)
		}
		if n > 0 && len(repl.String()) > 0 && len(repl.String()) > (b.lim.Output-len(s))/n {
			return b.trip(OutputLimitError(b.lim))
		}
	case "join":
		if sep := arg(0, "d"); sep != nil && in.Val.IsValid() {
			if k := in.Val.Kind(); k == reflect.Slice || k == reflect.Array {
				if n := in.Val.Len(); n > 1 && len(sep.String()) > b.lim.Output/(n-1) {
					return b.trip(OutputLimitError(b.lim))
				}
			}
		}
	}
	return nil
}
