// Package httpx holds the HTTP helpers the API's handler packages (api and
// api/auth) share: reading a JSON body, the common refusals, paging
// parameters, the bearer token. It imports no handler package.
// It must not import api, api/auth or api/dispatch (they import it), store,
// app or runners.
package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/docker/go-units"
	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/engine"
)

// BadRequest is a 400 with a message naming what is wrong.
func BadRequest(format string, args ...any) error {
	return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(format, args...))
}

// NotFound is a 404 with a message naming the missing thing.
func NotFound(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, engine.ErrNotFound)...)
}

// RetryLater is a refusal that passes with time (429, 503): the error
// mapper answers it with a Retry-After header.
type RetryLater struct {
	Status int
	Msg    string
	After  time.Duration
}

func (e *RetryLater) Error() string { return e.Msg }

// BodyTooLarge is the 413 of a body over the server's limit.
func BodyTooLarge(limit int64) error {
	return echo.NewHTTPError(http.StatusRequestEntityTooLarge,
		fmt.Sprintf("request body too large (limit %s, limits.request_body in the server config)", units.BytesSize(float64(limit))))
}

// BearerToken reads `Authorization: Bearer <token>` (scheme in any case).
func BearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// DecodeJSON reads a JSON object body into v. An empty body leaves v as
// it is, so endpoints whose fields are all optional accept no body at all.
// A v that is a FastDecoder decodes the bodies it takes itself.
func DecodeJSON(c echo.Context, v any) error {
	f, fast := v.(FastDecoder)
	var buf *[]byte
	if fast {
		// Its bodies are big and many (a push of 5,000 lines is 750 KB):
		// read into a buffer kept for the next, which DecodeFast leaves
		// nothing pointing into, rather than one grown afresh each time
		// (the garbage and page faults of that were most of a server's
		// extra CPU taking a flood of lines).
		buf = bodyBuffers.Get().(*[]byte)
	}
	body, err := readBody(c.Request(), buf)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if fast && f.DecodeFast(body) {
		if cap(body) <= maxPooledBody {
			*buf = body[:0]
			bodyBuffers.Put(buf)
		}
		return nil
	}
	return UnmarshalJSON(body, v)
}

// bodyBuffers keeps FastDecoder bodies' buffers, up to maxPooledBody.
var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 8 << 20

// FastDecoder is a request body decoded by hand where reflection costs
// too much (workerproto.LogPush, pushed by every remote worker about once
// a second per running step). DecodeFast either decodes body as
// UnmarshalJSON would, to the same value, and returns true; or returns
// false, leaving v as it was and the body to UnmarshalJSON, which decodes
// or refuses it. So a body means the same and is refused with the same
// message either way.
type FastDecoder interface {
	DecodeFast(body []byte) bool
}

// ReadBody reads the whole request body, refusing one over the body limit
// (413) and one that is not valid UTF-8 (400): Go's JSON decoder would
// silently turn the bad bytes into U+FFFD, changing what the caller sent.
func ReadBody(r *http.Request) ([]byte, error) {
	return readBody(r, nil)
}

// readBody is ReadBody into *buf's space, if buf is not nil, then sized
// first for the length the request announces, up to 1 MiB: only the
// FastDecoder's endpoints, behind the worker token, pass a buf, so an
// anonymous request's claimed length costs nothing before it is sent.
func readBody(r *http.Request, buf *[]byte) ([]byte, error) {
	var b []byte
	if buf != nil {
		b = (*buf)[:0]
		if n := int(min(r.ContentLength, 1<<20)) + bytes.MinRead; n > cap(b) {
			b = make([]byte, 0, n) // MinRead: ReadFrom reads the end in place
		}
	}
	w := bytes.NewBuffer(b)
	_, err := w.ReadFrom(r.Body)
	body := w.Bytes()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, BodyTooLarge(tooLarge.Limit)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, echo.NewHTTPError(http.StatusRequestTimeout, "request body did not arrive in time")
		}
		return nil, BadRequest("read request body: %v", err)
	}
	if !utf8.Valid(body) {
		return nil, BadRequest("request body is not valid UTF-8 (first bad byte at offset %d): send UTF-8 text", invalidUTF8At(body))
	}
	return body, nil
}

// invalidUTF8At is the offset of the first byte that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// UnmarshalJSON decodes one JSON value into v, with messages that name the
// field and the kinds involved.
func UnmarshalJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return BadRequest("field %s: expected %s, got JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		if errors.As(err, &te) {
			return BadRequest("request body must be a JSON object, got JSON %s", te.Value)
		}
		return BadRequest("malformed JSON body: %v", err)
	}
	if dec.More() {
		return BadRequest("malformed JSON body: unexpected data after the value")
	}
	return nil
}

// jsonKind names a Go kind the way a JSON author thinks of it.
func jsonKind(kind string) string {
	switch kind {
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "ptr", "interface":
		return "a value"
	}
	return "a number"
}
