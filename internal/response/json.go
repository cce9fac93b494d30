package response

// Walking a JSON text's prefix without decoding it. A refusal's body is read
// only as far as Peek read it (PeekLimit), which may end anywhere, even
// inside a string: a JSON decoder would reject the whole, and the members
// before the cut are what a provider puts first (the error's code, message
// and details). So an object's members are found where they are and handed
// over as the text they are written as, a value cut short as far as the
// prefix holds it (the walk ends with it). Nothing is unescaped or
// allocated: keys and strings are compared, as written, with the ASCII names
// the providers document, and one with an escape in it matches none. No
// recursion either: a value is skipped by counting brackets, so that
// hostile nesting costs one pass.

// skipSpace returns b without the whitespace JSON allows before a token.
func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// members calls f with the key and the value of each member of the object b
// starts with (after whitespace), in order, while f returns true. The key is
// its string's content as written; the value is its text, or what b holds of
// it when b ends inside it (that call is then the last).
func members(b []byte, f func(key, val []byte) bool) {
	b = skipSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return
	}
	b = b[1:]
	for first := true; ; first = false {
		b = skipSpace(b)
		if len(b) == 0 || b[0] == '}' {
			return
		}
		if !first {
			if b[0] != ',' {
				return
			}
			b = skipSpace(b[1:])
		}
		key, rest, ok := cutString(b)
		if !ok {
			return
		}
		b = skipSpace(rest)
		if len(b) == 0 || b[0] != ':' {
			return
		}
		b = skipSpace(b[1:])
		n, whole := valueLen(b)
		if !f(key, b[:n]) || !whole {
			return
		}
		b = b[n:]
	}
}

// elements calls f with each element of the array b starts with (after
// whitespace), in order, while f returns true; as members does, the last
// element may be cut short.
func elements(b []byte, f func(val []byte) bool) {
	b = skipSpace(b)
	if len(b) == 0 || b[0] != '[' {
		return
	}
	b = b[1:]
	for first := true; ; first = false {
		b = skipSpace(b)
		if len(b) == 0 || b[0] == ']' {
			return
		}
		if !first {
			if b[0] != ',' {
				return
			}
			b = skipSpace(b[1:])
		}
		n, whole := valueLen(b)
		if n == 0 || !f(b[:n]) || !whole {
			return
		}
		b = b[n:]
	}
}

// valueLen returns the length of the JSON value b starts with, and false
// when b ends before the value does (or holds none). Brackets are counted,
// strings skipped, not checked further: a malformed value is still
// bounded, and what it holds reads as nothing.
func valueLen(b []byte) (int, bool) {
	depth := 0
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			n := stringLen(b[i:])
			if n < 0 {
				return len(b), false
			}
			i += n
		case c == '{' || c == '[':
			depth++
			i++
		case c == '}' || c == ']':
			if depth == 0 {
				return i, i > 0 // a scalar, ended by its container's end
			}
			depth--
			i++
		case depth == 0 && (c == ',' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return i, i > 0
		default:
			i++
			continue // a scalar's byte, or anything within a container
		}
		if depth == 0 {
			return i, true // a string or a container, whole
		}
	}
	return len(b), false
}

// stringLen returns the length of the JSON string b starts with, quotes
// included; -1 when b ends before it does.
func stringLen(b []byte) int {
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// cutString returns the content of the string b starts with, as written,
// and what follows it.
func cutString(b []byte) (content, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, b, false
	}
	n := stringLen(b)
	if n < 0 {
		return nil, b, false
	}
	return b[1 : n-1], b[n:], true
}

// str returns the content of the string val is, as written; false for any
// other value, or a string cut short.
func str(val []byte) ([]byte, bool) {
	s, rest, ok := cutString(val)
	return s, ok && len(skipSpace(rest)) == 0
}
