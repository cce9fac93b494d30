package response

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pacer-go/pacer/internal/header"
)

// A refusal inside a stream, read as the caller reads it (the package
// doc's Streams says why not before).

// Stream reports whether Watch reads resp: a 2xx with a body that is a
// text/event-stream, or states no type at all (then Watch reads it only if
// it opens as an event stream: a recorder or a proxy that drops the type
// still carries a stream's refusal). Content-Type is looked up as
// net/http's responses hold it (canonical key); nothing else is read.
func Stream(resp *http.Response) bool {
	if resp.StatusCode < 200 || resp.StatusCode > 299 || resp.ContentLength == 0 ||
		resp.Body == nil || resp.Body == http.NoBody {
		return false
	}
	ct := resp.Header["Content-Type"]
	return len(ct) == 0 || isEventStream(ct[0])
}

// isEventStream reports whether a Content-Type is text/event-stream, in any
// case, with or without parameters.
func isEventStream(ct string) bool {
	const media = "text/event-stream"
	if len(ct) < len(media) || !strings.EqualFold(ct[:len(media)], media) {
		return false
	}
	rest := strings.TrimLeft(ct[len(media):], " \t")
	return rest == "" || rest[0] == ';'
}

// Watch has resp's body, a stream (Stream), read its first data line as the
// caller reads the body, and call report, once and on the reading
// goroutine, with what it means when it is a refusal: an error whose code,
// status or type is a refusal's (bodyFacts.refusalStatus) is read as a
// refusal's body is, into a Meaning with the status it stands for and no
// headers (those were the 200's, read already). now is the clock the
// reading is made at (nil: time.Now). The body serves every byte as before.
func Watch(resp *http.Response, caps header.Caps, clk *Clock, now func() time.Time, report func(*Meaning)) {
	if now == nil {
		now = time.Now
	}
	resp.Body = &watchedBody{rc: resp.Body, caps: caps, clk: clk, now: now, report: report,
		sniff: len(resp.Header["Content-Type"]) == 0}
}

// watchedBody is a stream whose first data line is read as the caller
// reads it.
type watchedBody struct {
	rc     io.ReadCloser
	seen   []byte // what the caller read so far, at most PeekLimit, until done
	done   bool
	caps   header.Caps
	clk    *Clock
	now    func() time.Time
	report func(*Meaning)
	// sniff: the response states no type; its first line must be an
	// event stream's before anything is read as one (see opensAsStream).
	sniff bool
}

func (w *watchedBody) Read(p []byte) (int, error) {
	n, err := w.rc.Read(p)
	if !w.done && (n > 0 || err != nil) {
		w.look(p[:n], err != nil)
	}
	return n, err
}

func (w *watchedBody) Close() error { return w.rc.Close() }

// look takes in p, the bytes a read brought, and reads the first data line
// once it is whole, or once the stream ends or PeekLimit bytes came
// without one ending.
func (w *watchedBody) look(p []byte, end bool) {
	w.seen = append(w.seen, p[:min(len(p), PeekLimit-len(w.seen))]...)
	if w.sniff {
		switch opens, known := opensAsStream(w.seen); {
		case !known && !end:
			return
		case !opens:
			w.done, w.seen = true, nil
			return
		}
		w.sniff = false
	}
	data, whole := firstData(w.seen)
	if !whole && !end && len(w.seen) < PeekLimit {
		return
	}
	w.done = true
	if len(data) > 0 {
		w.read(data)
	}
	w.seen = nil
}

// read reports data, the stream's first data line, if it is a refusal.
func (w *watchedBody) read(data []byte) {
	var f bodyFacts
	f.read(data)
	status := f.refusalStatus()
	if status == 0 {
		return
	}
	m := &Meaning{Status: status}
	readBody(m, data, &f, w.now(), w.caps, w.clk)
	if m.Throttled = throttled(m); m.Throttled || m.Body != None {
		w.report(m)
	}
}

// opensAsStream reports whether b, the start of a body that states no type,
// opens as a Server-Sent Events stream: its first line a field (data,
// event, id, retry) or a comment. known is false while the first line is
// not whole and could still be one.
func opensAsStream(b []byte) (opens, known bool) {
	line, _, ended := bytes.Cut(b, []byte("\n"))
	for _, field := range [...]string{"data", "event", "id", "retry"} {
		if v, ok := bytes.CutPrefix(line, []byte(field)); ok {
			if len(v) == 0 {
				return ended, ended || len(b) >= PeekLimit
			}
			if v[0] == ':' || v[0] == '\r' {
				return true, true
			}
		}
		if len(line) < len(field) && !ended && bytes.HasPrefix([]byte(field), line) {
			return false, false
		}
	}
	if len(line) > 0 && line[0] == ':' {
		return true, true
	}
	return false, len(line) > 0 || ended
}

// firstData returns the value of the first data line in b, a Server-Sent
// Events stream's start (https://html.spec.whatwg.org/multipage/server-sent-events.html:
// a "data" field, its value after the colon and one optional space;
// comments, other fields and empty events before it are passed over), and
// whether its line ended. One line: the JSON the providers send as an event
// is one.
func firstData(b []byte) ([]byte, bool) {
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		line, ended := b, i >= 0
		if ended {
			line = b[:i]
		}
		if v, ok := bytes.CutPrefix(line, []byte("data")); ok && (len(v) == 0 || v[0] == ':') {
			v = bytes.TrimPrefix(v, []byte(":"))
			return bytes.TrimPrefix(v, []byte(" ")), ended
		}
		if !ended {
			return nil, false
		}
		b = b[i+1:]
	}
	return nil, false
}
