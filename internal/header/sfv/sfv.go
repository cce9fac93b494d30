// Package sfv is a small parser for RFC 9651 structured fields, the syntax
// of the IETF RateLimit and RateLimit-Policy fields. It is written here
// rather than imported because pacer's module takes no new dependencies, because
// pacer needs only the parsing half (no serialiser, no Go value model), and
// because a parser that runs on every response must not allocate: it works on
// substrings of the field value, validates a whole field before handing out
// any member (RFC 9651 says a field that fails to parse is ignored as a
// whole), and keeps parameters as their raw text until a caller reads them.
// The only allocations are unescaping a String that contains backslash
// escapes and decoding a Display String, both rare in rate-limit fields.
package sfv

import (
	"strings"
	"unicode/utf8"
)

// Kind is the type of a structured-field bare item.
type Kind uint8

const (
	Integer Kind = iota + 1
	Decimal
	String
	Token
	Binary
	Boolean
	Date
	DisplayString
	InnerList // a list member that is an inner list; its items are not kept
)

// Item is a bare item. Integers (at most 15 digits) and decimals are exact
// in a float64, so both are kept in Num.
type Item struct {
	Kind Kind
	Num  float64 // Integer, Decimal, Date (seconds since the epoch)
	Str  string  // String (unescaped), Token, Binary (base64 text), Display String (decoded)
	Bool bool    // Boolean
}

// Number returns the value of an Integer or Decimal item.
func (it Item) Number() (float64, bool) {
	if it.Kind == Integer || it.Kind == Decimal {
		return it.Num, true
	}
	return 0, false
}

// Name returns the text of a String or Token item.
func (it Item) Name() (string, bool) {
	if it.Kind == String || it.Kind == Token {
		return it.Str, true
	}
	return "", false
}

// Params is the already validated parameter text of a member, such as
// `;q=100;w=60`.
type Params string

// Each calls fn for every parameter, in order; a parameter without a value
// is the Boolean true. RFC 9651 says the last of duplicated keys wins: a
// caller gets that by letting later calls overwrite earlier ones.
func (ps Params) Each(fn func(key string, value Item)) {
	p := parser{s: string(ps)}
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		k, _ := p.key()
		v := Item{Kind: Boolean, Bool: true}
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			v, _ = p.bareItem(true)
		}
		fn(k, v)
	}
}

// Member is one member of a list or dictionary.
type Member struct {
	Key    string // dictionary key; "" in a list
	Value  Item
	Params Params
}

// MaxMembers bounds how many members of one field Each hands out: pacer
// keeps at most 16 quotas of a response, and a hostile field must not cost
// memory.
const MaxMembers = 16

// Each parses s as an RFC 9651 List (dict false) or Dictionary (dict true)
// and, only if the whole field is valid, calls fn for each of its first
// MaxMembers members in order until fn returns false. It reports whether s
// was valid. One pass both validates and collects, into a stack buffer.
func Each(s string, dict bool, fn func(Member) bool) bool {
	var buf [MaxMembers]Member
	n := 0
	p := parser{s: s}
	valid := p.top(dict, func(m Member) {
		if n < len(buf) {
			buf[n] = m
			n++
		}
	})
	if !valid {
		return false
	}
	for _, m := range buf[:n] {
		if !fn(m) {
			break
		}
	}
	return true
}

// parser holds the position in the field value being parsed.
type parser struct {
	s string
	i int
}

func (p *parser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *parser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// top parses a whole field value (RFC 9651 section 4.2). An empty value is an
// empty list or dictionary.
func (p *parser) top(dict bool, fn func(Member)) bool {
	p.skipSP()
	for p.i < len(p.s) {
		var m Member
		ok := true
		if dict {
			if m.Key, ok = p.key(); !ok {
				return false
			}
			if p.i < len(p.s) && p.s[p.i] == '=' {
				p.i++
				m.Value, m.Params, ok = p.member()
			} else {
				m.Value = Item{Kind: Boolean, Bool: true}
				m.Params, ok = p.params()
			}
		} else {
			m.Value, m.Params, ok = p.member()
		}
		if !ok {
			return false
		}
		fn(m)
		p.skipOWS()
		if p.i == len(p.s) {
			return true
		}
		if p.s[p.i] != ',' {
			return false
		}
		p.i++
		p.skipOWS()
		if p.i == len(p.s) {
			return false // trailing comma
		}
	}
	return true
}

// member parses an item or an inner list, with its parameters.
func (p *parser) member() (Item, Params, bool) {
	var it Item
	if p.i < len(p.s) && p.s[p.i] == '(' {
		if !p.innerList() {
			return it, "", false
		}
		it.Kind = InnerList
	} else {
		var ok bool
		if it, ok = p.bareItem(true); !ok {
			return it, "", false
		}
	}
	params, ok := p.params()
	return it, params, ok
}

func (p *parser) innerList() bool {
	p.i++ // '('
	for p.i < len(p.s) {
		p.skipSP()
		if p.i < len(p.s) && p.s[p.i] == ')' {
			p.i++
			return true
		}
		if _, ok := p.bareItem(false); !ok {
			return false
		}
		if _, ok := p.params(); !ok {
			return false
		}
		if p.i == len(p.s) || (p.s[p.i] != ' ' && p.s[p.i] != ')') {
			return false
		}
	}
	return false
}

func (p *parser) params() (Params, bool) {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		if _, ok := p.key(); !ok {
			return "", false
		}
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			if _, ok := p.bareItem(false); !ok {
				return "", false
			}
		}
	}
	return Params(p.s[start:p.i]), true
}

// key parses a dictionary or parameter Key: lcalpha or "*", then lcalpha,
// DIGIT, "_", "-", "." or "*".
func (p *parser) key() (string, bool) {
	start := p.i
	if p.i == len(p.s) || !(isLower(p.s[p.i]) || p.s[p.i] == '*') {
		return "", false
	}
	for p.i++; p.i < len(p.s); p.i++ {
		c := p.s[p.i]
		if !isLower(c) && !isDigit(c) && c != '_' && c != '-' && c != '.' && c != '*' {
			break
		}
	}
	return p.s[start:p.i], true
}

func (p *parser) bareItem(decode bool) (Item, bool) {
	if p.i == len(p.s) {
		return Item{}, false
	}
	switch c := p.s[p.i]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.string(decode)
	case c == '*' || isAlpha(c):
		return p.token()
	case c == ':':
		return p.binary()
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return Item{Kind: Boolean, Bool: p.s[p.i-1] == '1'}, true
		}
		return Item{}, false
	case c == '@':
		p.i++
		it, ok := p.number()
		if !ok || it.Kind != Integer {
			return Item{}, false
		}
		it.Kind = Date
		return it, true
	case c == '%':
		return p.displayString()
	}
	return Item{}, false
}

// number parses an Integer (at most 15 digits) or a Decimal (at most 12
// integer and 3 fractional digits), RFC 9651 section 4.2.4.
func (p *parser) number() (Item, bool) {
	neg := false
	if p.i < len(p.s) && p.s[p.i] == '-' {
		neg = true
		p.i++
	}
	if p.i == len(p.s) || !isDigit(p.s[p.i]) {
		return Item{}, false
	}
	start := p.i
	var mant int64 // overflows only for digit strings rejected below
	for ; p.i < len(p.s) && isDigit(p.s[p.i]); p.i++ {
		mant = mant*10 + int64(p.s[p.i]-'0')
	}
	intDigits := p.i - start
	if p.i == len(p.s) || p.s[p.i] != '.' {
		if intDigits > 15 {
			return Item{}, false
		}
		it := Item{Kind: Integer, Num: float64(mant)}
		if neg {
			it.Num = -it.Num
		}
		return it, true
	}
	if intDigits > 12 {
		return Item{}, false
	}
	p.i++ // '.'
	fracStart := p.i
	for ; p.i < len(p.s) && isDigit(p.s[p.i]); p.i++ {
		mant = mant*10 + int64(p.s[p.i]-'0')
	}
	frac := p.i - fracStart
	if frac == 0 || frac > 3 {
		return Item{}, false
	}
	// Both operands are exact, so the quotient is correctly rounded.
	it := Item{Kind: Decimal, Num: float64(mant) / [...]float64{1, 10, 100, 1000}[frac]}
	if neg {
		it.Num = -it.Num
	}
	return it, true
}

func (p *parser) string(decode bool) (Item, bool) {
	p.i++ // DQUOTE
	start, escaped := p.i, false
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '\\':
			if p.i+1 == len(p.s) || (p.s[p.i+1] != '"' && p.s[p.i+1] != '\\') {
				return Item{}, false
			}
			escaped = true
			p.i += 2
		case c == '"':
			s := p.s[start:p.i]
			p.i++
			if escaped && decode {
				s = unescape(s)
			}
			return Item{Kind: String, Str: s}, true
		case c < 0x20 || c > 0x7e:
			return Item{}, false
		default:
			p.i++
		}
	}
	return Item{}, false
}

func unescape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// token parses a Token: ALPHA or "*", then tchar, ":" or "/".
func (p *parser) token() (Item, bool) {
	start := p.i
	for p.i++; p.i < len(p.s) && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/'); p.i++ {
	}
	return Item{Kind: Token, Str: p.s[start:p.i]}, true
}

// binary parses a Byte Sequence, keeping its base64 text (pacer never needs
// the bytes). As RFC 9651 asks, missing "=" padding and non-zero pad bits are
// accepted; anything that cannot be base64 is not.
func (p *parser) binary() (Item, bool) {
	p.i++ // ':'
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return Item{}, false
	}
	b64 := p.s[p.i : p.i+end]
	p.i += end + 1
	data := strings.TrimRight(b64, "=")
	pad := len(b64) - len(data)
	if pad > 2 || len(data)%4 == 1 || (pad > 0 && len(b64)%4 != 0) {
		return Item{}, false
	}
	for i := 0; i < len(data); i++ {
		if c := data[i]; !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' {
			return Item{}, false
		}
	}
	return Item{Kind: Binary, Str: b64}, true
}

// displayString parses a Display String: %"…" with lowercase %xx escapes
// that must decode to valid UTF-8.
func (p *parser) displayString() (Item, bool) {
	if p.i+1 == len(p.s) || p.s[p.i+1] != '"' {
		return Item{}, false
	}
	p.i += 2
	var buf []byte
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c < 0x20 || c > 0x7e:
			return Item{}, false
		case c == '%':
			if p.i+2 > len(p.s) {
				return Item{}, false
			}
			hi, ok1 := lowerHex(p.s[p.i])
			lo, ok2 := lowerHex(p.s[p.i+1])
			if !ok1 || !ok2 {
				return Item{}, false
			}
			buf = append(buf, hi<<4|lo)
			p.i += 2
		case c == '"':
			if !utf8.Valid(buf) {
				return Item{}, false
			}
			return Item{Kind: DisplayString, Str: string(buf)}, true
		default:
			buf = append(buf, c)
		}
	}
	return Item{}, false
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case isDigit(c):
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool { return isLower(c) || ('A' <= c && c <= 'Z') }

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	if isAlpha(c) || isDigit(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
