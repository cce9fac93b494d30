package sfv

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func sfInt(n float64) Item       { return Item{Kind: Integer, Num: n} }
func sfDec(n float64) Item       { return Item{Kind: Decimal, Num: n} }
func sfStr(s string) Item        { return Item{Kind: String, Str: s} }
func sfTok(s string) Item        { return Item{Kind: Token, Str: s} }
func sfBool(b bool) Item         { return Item{Kind: Boolean, Bool: b} }
func sfBin(b64 string) Item      { return Item{Kind: Binary, Str: b64} }
func sfInner() Item              { return Item{Kind: InnerList} }
func m(it Item, p string) Member { return Member{Value: it, Params: Params(p)} }

func sfCollect(s string, dict bool) ([]Member, bool) {
	var got []Member
	ok := Each(s, dict, func(m Member) bool {
		got = append(got, m)
		return true
	})
	return got, ok
}

// Cases follow RFC 9651 and the httpwg structured-field-tests suite.
func TestSFListParsesPerRFC9651(t *testing.T) {
	cases := []struct {
		in   string
		want []Member // nil with bad set: must fail as a whole
		bad  bool
	}{
		{"", nil, false},
		{"1, 42", []Member{m(sfInt(1), ""), m(sfInt(42), "")}, false},
		{"1,42", []Member{m(sfInt(1), ""), m(sfInt(42), "")}, false},
		{"  1 \t,\t 42  ", []Member{m(sfInt(1), ""), m(sfInt(42), "")}, false},
		{"-123456789012345, 0012", []Member{m(sfInt(-123456789012345), ""), m(sfInt(12), "")}, false},
		{"123456789012.123, -1.5, 2.50", []Member{m(sfDec(123456789012.123), ""), m(sfDec(-1.5), ""), m(sfDec(2.5), "")}, false},
		{`"foo", "f\"o\\o", ""`, []Member{m(sfStr("foo"), ""), m(sfStr(`f"o\o`), ""), m(sfStr(""), "")}, false},
		{"foo123/456, *foo, a:b, A!#$%&'*+-.^_`|~", []Member{m(sfTok("foo123/456"), ""), m(sfTok("*foo"), ""),
			m(sfTok("a:b"), ""), m(sfTok("A!#$%&'*+-.^_`|~"), "")}, false},
		{"?1, ?0", []Member{m(sfBool(true), ""), m(sfBool(false), "")}, false},
		{":aGVsbG8=:, :aGVsbG8:, ::, :aGVsbG9=:", []Member{m(sfBin("aGVsbG8="), ""), m(sfBin("aGVsbG8"), ""),
			m(sfBin(""), ""), m(sfBin("aGVsbG9="), "")}, false},
		{"@1659578233, @-1", []Member{m(Item{Kind: Date, Num: 1659578233}, ""), m(Item{Kind: Date, Num: -1}, "")}, false},
		{`%"f%c3%bc%c3%bc", %"a\"`, []Member{m(Item{Kind: DisplayString, Str: "füü"}, ""),
			m(Item{Kind: DisplayString, Str: `a\`}, "")}, false},
		{"1;a=1;b; c=?0;*d=\"x\", 2", []Member{m(sfInt(1), `;a=1;b; c=?0;*d="x"`), m(sfInt(2), "")}, false},
		{"(1 2);w=1, (), ( 1  \"a\";x ), (a b);q", []Member{m(sfInner(), ";w=1"), m(sfInner(), ""),
			m(sfInner(), ""), m(sfInner(), ";q")}, false},
		// Invalid as a whole.
		{"1,", nil, true},
		{"1,,42", nil, true},
		{"1, 42,  ", nil, true},
		{"1 ;a=1", nil, true},
		{"1;A=1", nil, true},
		{"1;=1", nil, true},
		{"1;a=", nil, true},
		{"1234567890123456", nil, true},
		{"1234567890123.1", nil, true},
		{"1.1234", nil, true},
		{"1.", nil, true},
		{"-", nil, true},
		{"--1", nil, true},
		{"-a", nil, true},
		{"1.2.3", nil, true},
		{"1foo", nil, true},
		{`"foo`, nil, true},
		{`"foo\x"`, nil, true},
		{`"foo\`, nil, true},
		{"\"caf\xc3\xa9\"", nil, true},
		{"\"tab\there\"", nil, true},
		{"?2", nil, true},
		{"?", nil, true},
		{":aGVsbG8=", nil, true},
		{":a:", nil, true},
		{":aGVsb*8=:", nil, true},
		{":aGVsbG8==:", nil, true},
		{":aGVs=bG8:", nil, true},
		{"@1659578233.1", nil, true},
		{"@", nil, true},
		{`%"f%C3%BC"`, nil, true},
		{`%"%c3"`, nil, true},
		{`%"%c"`, nil, true},
		{`%"%zz"`, nil, true},
		{`%"abc`, nil, true},
		{"%abc", nil, true},
		{"%\"\x01\"", nil, true},
		{"(1,2)", nil, true},
		{"(1 2", nil, true},
		{"(", nil, true},
		{"(1 2)a", nil, true},
		{"(1;A=1)", nil, true},
		{"(\"a)", nil, true},
		{"(1;a=1", nil, true},
		{"(1 ", nil, true},
		{"\t1", nil, true},
		{"1 2", nil, true},
		{"!", nil, true},
	}
	for _, tc := range cases {
		got, ok := sfCollect(tc.in, false)
		assert.Equal(t, !tc.bad, ok, "%q valid", tc.in)
		assert.Equal(t, tc.want, got, "%q members", tc.in)
	}
}

func TestSFDictionaryParsesPerRFC9651(t *testing.T) {
	d := func(k string, it Item, p string) Member { return Member{Key: k, Value: it, Params: Params(p)} }
	cases := []struct {
		in   string
		want []Member
		bad  bool
	}{
		{"", nil, false},
		{"limit=100, remaining=50, reset=5", []Member{d("limit", sfInt(100), ""), d("remaining", sfInt(50), ""),
			d("reset", sfInt(5), "")}, false},
		{"a=1,b=2;x=?0, c, *d;e=1, f=(1 2);g", []Member{d("a", sfInt(1), ""), d("b", sfInt(2), ";x=?0"),
			d("c", sfBool(true), ""), d("*d", sfBool(true), ";e=1"), d("f", sfInner(), ";g")}, false},
		{"a=1, a=2", []Member{d("a", sfInt(1), ""), d("a", sfInt(2), "")}, false},
		{"default;r=50;t=30", []Member{d("default", sfBool(true), ";r=50;t=30")}, false},
		{"A=1", nil, true},
		{"a=1,", nil, true},
		{"a=", nil, true},
		{"a=1 b=2", nil, true},
		{`"default";r=50`, nil, true},
		{"a=(1", nil, true},
		{"a;B", nil, true},
	}
	for _, tc := range cases {
		got, ok := sfCollect(tc.in, true)
		assert.Equal(t, !tc.bad, ok, "%q valid", tc.in)
		assert.Equal(t, tc.want, got, "%q members", tc.in)
	}
}

func TestSFEachStopsWhenAskedAndSkipsInvalidFieldsEntirely(t *testing.T) {
	calls := 0
	ok := Each("1, 2, 3", false, func(Member) bool { calls++; return calls < 2 })
	assert.True(t, ok)
	assert.Equal(t, 2, calls)

	calls = 0
	ok = Each("1, 2, (3", false, func(Member) bool { calls++; return true })
	assert.False(t, ok)
	assert.Zero(t, calls, "no member of an invalid field may be used")
}

func TestSFParamsEachVisitsAllInOrderDecoded(t *testing.T) {
	type param struct {
		key   string
		value Item
	}
	var got []param
	Params(`;a=1;b; c="x\"y";a=2;d=?0;e=%"%c3%a9";f="plain";a`).Each(func(k string, v Item) {
		got = append(got, param{k, v})
	})
	assert.Equal(t, []param{
		{"a", sfInt(1)}, {"b", sfBool(true)}, {"c", sfStr(`x"y`)}, {"a", sfInt(2)}, {"d", sfBool(false)},
		{"e", Item{Kind: DisplayString, Str: "é"}}, {"f", sfStr("plain")}, {"a", sfBool(true)},
	}, got)
	Params("").Each(func(string, Item) { t.Fatal("no parameters to visit") })
}

func TestSFItemAccessors(t *testing.T) {
	n, ok := sfDec(1.5).Number()
	assert.True(t, ok)
	assert.Equal(t, 1.5, n)
	_, ok = sfStr("1").Number()
	assert.False(t, ok)
	s, ok := sfTok("a").Name()
	assert.True(t, ok)
	assert.Equal(t, "a", s)
	_, ok = sfInt(1).Name()
	assert.False(t, ok)
}

func TestSFEachHandsOutAtMost16MembersButValidatesAll(t *testing.T) {
	long := strings.Repeat("1, ", 99) + "1"
	got, ok := sfCollect(long, false)
	assert.True(t, ok)
	assert.Len(t, got, MaxMembers)

	_, ok = sfCollect(long+", (", false)
	assert.False(t, ok, "an error after the 16th member still invalidates the field")
}
