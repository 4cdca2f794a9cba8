package lexval

import (
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/jsvalue"
)

// format is a lexicon string format. Where indigo's syntax package accepts
// exactly what the reference (@atproto/syntax, in lex-schema's strict mode)
// accepts, its rules are used (syntax.go, without its regexps); datetime, uri, at-uri, cid and language follow the
// reference's own rules, which differ from indigo's.
type format uint8

const (
	fmtNone format = iota
	fmtATIdentifier
	fmtATURI
	fmtCID
	fmtDatetime
	fmtDID
	fmtHandle
	fmtLanguage
	fmtNSID
	fmtRecordKey
	fmtTID
	fmtURI
)

var formats = map[string]format{
	"at-identifier": fmtATIdentifier,
	"at-uri":        fmtATURI,
	"cid":           fmtCID,
	"datetime":      fmtDatetime,
	"did":           fmtDID,
	"handle":        fmtHandle,
	"language":      fmtLanguage,
	"nsid":          fmtNSID,
	"record-key":    fmtRecordKey,
	"tid":           fmtTID,
	"uri":           fmtURI,
}

// description is how the reference names the format in messages.
func (f format) description() string {
	switch f {
	case fmtATIdentifier:
		return "AT identifier"
	case fmtDID:
		return "DID"
	case fmtNSID:
		return "NSID"
	case fmtCID:
		return "CID string"
	case fmtTID:
		return "TID string"
	case fmtRecordKey:
		return "record key"
	}
	for name, g := range formats {
		if g == f {
			return name
		}
	}
	return "string"
}

func (f format) valid(s string) bool {
	switch f {
	case fmtATIdentifier:
		if strings.HasPrefix(s, "did:") {
			return validDID(s)
		}
		return validHandle(s)
	case fmtATURI:
		return validATURI(s)
	case fmtCID:
		return validCIDString(s)
	case fmtDatetime:
		return validDatetime(s)
	case fmtDID:
		return validDID(s)
	case fmtHandle:
		return validHandle(s)
	case fmtLanguage:
		return validLanguage(s)
	case fmtNSID:
		return ValidNSID(s)
	case fmtRecordKey:
		return validRecordKey(s)
	case fmtTID:
		return validTID(s)
	case fmtURI:
		return validURI(s)
	}
	return true
}

// validRecordKey is syntax.ParseRecordKey (and @atproto/syntax's
// isValidRecordKey) without the regexp, as it runs on every write.
func validRecordKey(s string) bool {
	if len(s) == 0 || len(s) > 512 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_' || c == '~' || c == '.' || c == ':' || c == '-':
		default:
			return false
		}
	}
	return true
}

// validTID is syntax.ParseTID without the regexp.
func validTID(s string) bool {
	if len(s) != 13 || !(s[0] >= '2' && s[0] <= '7' || s[0] >= 'a' && s[0] <= 'j') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= '2' && c <= '7' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// validCIDString: the string parses as a CID and is that CID's canonical
// string (lex-data's validateCidString).
func validCIDString(s string) bool {
	if s == "" || len(s) > 128 || !cidParsesInJS(s) {
		return false
	}
	c, err := cid.Decode(s)
	return err == nil && c.String() == s
}

// validDatetime is @atproto/syntax's isDatetimeString: RFC 3339 with a
// timezone (YYYY-MM-DDThh:mm:ss[.f+](Z|±hh:mm)), no "-00:00", and a date
// that JavaScript's Date parses (which refuses day 00 and second 60 but
// rolls Feb 30 over to March) to a UTC year between 0 and 9999.
func validDatetime(s string) bool {
	if len(s) < 20 || len(s) > 64 || strings.HasSuffix(s, "-00:00") {
		return false
	}
	digits := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	if !digits(s[0:4]) || s[4] != '-' || !digits(s[5:7]) || s[7] != '-' || !digits(s[8:10]) || s[10] != 'T' ||
		!digits(s[11:13]) || s[13] != ':' || !digits(s[14:16]) || s[16] != ':' || !digits(s[17:19]) {
		return false
	}
	year, month, day := atoi(s[0:4]), atoi(s[5:7]), atoi(s[8:10])
	hour, minute, sec := atoi(s[11:13]), atoi(s[14:16]), atoi(s[17:19])
	if month < 1 || month > 12 || day > 31 || hour > 23 || minute > 59 || sec > 60 {
		return false
	}
	rest := s[19:]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 {
			return false
		}
		rest = rest[n:]
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC)
	switch {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && digits(rest[1:3]) && rest[3] == ':' && digits(rest[4:6]):
		oh, om := atoi(rest[1:3]), atoi(rest[4:6])
		if oh > 23 || om > 59 {
			return false
		}
		off := time.Duration(oh)*time.Hour + time.Duration(om)*time.Minute
		if rest[0] == '+' {
			off = -off
		}
		t = t.Add(off)
	default:
		return false
	}
	if day == 0 || sec == 60 { // JavaScript's Date refuses these
		return false
	}
	return t.Year() >= 0 && t.Year() <= 9999
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// validURI is @atproto/syntax's isValidUri: /^\w+:(?:\/\/)?[^\s/][^\s]*$/
// with JavaScript's \w and \s.
func validURI(s string) bool {
	i := 0
	for i < len(s) && isWordByte(s[i]) {
		i++
	}
	if i == 0 || i == len(s) || s[i] != ':' {
		return false
	}
	rest := s[i+1:]
	// The optional "//" may also be read as the start of the rest, but the
	// rest may not start with '/', so it must be taken when present.
	rest = strings.TrimPrefix(rest, "//")
	if rest == "" || rest[0] == '/' {
		return false
	}
	return strings.IndexFunc(rest, jsvalue.IsSpace) < 0
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// atURIChar: the characters the reference's character check allows,
// [a-zA-Z0-9._~:@!$&'()*+,;=%/\\\[\]#?-].
func atURIChar(c byte) bool { return atURIChars[c] }

// jsonPtrChar: the characters of a fragment after its '/', as the
// reference's ^/[a-zA-Z0-9._~:@!$&')(*+,;=%\[\]/-]*$ has them.
func jsonPtrChar(c byte) bool { return jsonPtrChars[c] }

var atURIChars, jsonPtrChars = byteSet("._~:@!$&'()*+,;=%/\\[]#?-"), byteSet("._~:@!$&')(*+,;=%[]/-")

// byteSet is the ASCII letters and digits and the bytes of extra.
func byteSet(extra string) (set [256]bool) {
	for c := 0; c < 256; c++ {
		set[c] = isLetter(byte(c)) || isDigit(byte(c))
	}
	for i := 0; i < len(extra); i++ {
		set[extra[i]] = true
	}
	return set
}

// isRESpace is RE2's \s: [\t\n\f\r ].
func isRESpace(c byte) bool { return c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' ' }

// atURIParts are an AT URI's parts, as the groups of the reference's
// pattern hold them; a part not there is ("", false).
type atURIParts struct {
	authority, collection, rkey, query, fragment         string
	hasCollection, hasRKey, slash, hasQuery, hasFragment bool
}

// splitATURI splits s as the reference's pattern
//
//	^at://([^/?#\s]+)(?:/([^/?#\s]+)(?:/([^/?#\s]+))?)?(/)?(\?[^#\s]*)?(#[^\s]*)?$
//
// does, \s being RE2's [\t\n\f\r ]: each part is the longest run its
// class allows (what follows a part is never in its class, so no shorter
// one leads to a match), and an optional part is taken when it can be
// (leaving one out never lets the rest match where taking it did not).
// ok is false when s does not match. TestATURIParts holds it to the
// regexp.
func splitATURI(s string) (p atURIParts, ok bool) {
	rest, ok := strings.CutPrefix(s, "at://")
	if !ok {
		return p, false
	}
	segment := func() string { // [^/?#\s]*
		i := 0
		for i < len(rest) && rest[i] != '/' && rest[i] != '?' && rest[i] != '#' && !isRESpace(rest[i]) {
			i++
		}
		seg := rest[:i]
		rest = rest[i:]
		return seg
	}
	if p.authority = segment(); p.authority == "" {
		return p, false
	}
	// (?:/(seg)(?:/(seg))?)?: a '/' followed by a segment character.
	startsSegment := func() bool {
		return len(rest) >= 2 && rest[0] == '/' && rest[1] != '/' && rest[1] != '?' && rest[1] != '#' && !isRESpace(rest[1])
	}
	if startsSegment() {
		rest = rest[1:]
		p.collection, p.hasCollection = segment(), true
		if startsSegment() {
			rest = rest[1:]
			p.rkey, p.hasRKey = segment(), true
		}
	}
	if strings.HasPrefix(rest, "/") {
		rest, p.slash = rest[1:], true
	}
	if strings.HasPrefix(rest, "?") {
		i := 1
		for i < len(rest) && rest[i] != '#' && !isRESpace(rest[i]) {
			i++
		}
		p.query, p.hasQuery, rest = rest[:i], true, rest[i:]
	}
	if strings.HasPrefix(rest, "#") {
		i := 1
		for i < len(rest) && !isRESpace(rest[i]) {
			i++
		}
		p.fragment, p.hasFragment, rest = rest[:i], true, rest[i:]
	}
	return p, rest == ""
}

// validATURI is @atproto/syntax's isAtUriString in strict mode.
func validATURI(s string) bool {
	if len(s) > 8192 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !atURIChar(s[i]) {
			return false
		}
	}
	p, ok := splitATURI(s)
	if !ok || !fmtATIdentifier.valid(p.authority) {
		return false
	}
	if p.hasCollection && !ValidNSID(p.collection) {
		return false
	}
	if p.hasFragment {
		h := p.fragment[1:]
		if h == "" || h[0] != '/' {
			return false
		}
		for i := 1; i < len(h); i++ {
			if !jsonPtrChar(h[i]) {
				return false
			}
		}
		// decodeURIComponent refuses bad escapes and escaped non-UTF-8.
		if u, err := url.PathUnescape(h); err != nil || !utf8.ValidString(u) {
			return false
		}
	}
	if p.slash || p.hasQuery {
		return false // a trailing slash, a query
	}
	return !p.hasRKey || validRecordKey(p.rkey)
}

var (
	langRE    = regexp.MustCompile(`^((?P<grandfathered>(en-GB-oed|i-ami|i-bnn|i-default|i-enochian|i-hak|i-klingon|i-lux|i-mingo|i-navajo|i-pwn|i-tao|i-tay|i-tsu|sgn-BE-FR|sgn-BE-NL|sgn-CH-DE)|(art-lojban|cel-gaulish|no-bok|no-nyn|zh-guoyu|zh-hakka|zh-min|zh-min-nan|zh-xiang))|((?P<language>([A-Za-z]{2,3}(-(?P<extlang>[A-Za-z]{3}(-[A-Za-z]{3}){0,2}))?)|[A-Za-z]{4}|[A-Za-z]{5,8})(-(?P<script>[A-Za-z]{4}))?(-(?P<region>[A-Za-z]{2}|[0-9]{3}))?(-(?P<variant>[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*(-(?P<extension>[0-9A-WY-Za-wy-z](-[A-Za-z0-9]{2,8})+))*(-(?P<privateUseA>[xX](-[A-Za-z0-9]{1,8})+))?)|(?P<privateUseB>[xX](-[A-Za-z0-9]{1,8})+))$`)
	langGroup = func(name string) int { return langRE.SubexpIndex(name) }
	lgGrand   = langGroup("grandfathered")
	lgLang    = langGroup("language")
	lgPrivB   = langGroup("privateUseB")

	alpha3     = regexp.MustCompile(`^[A-Za-z]{3}$`)
	alpha4     = regexp.MustCompile(`^[A-Za-z]{4}$`)
	regionRE   = regexp.MustCompile(`^([A-Za-z]{2}|[0-9]{3})$`)
	variantRE  = regexp.MustCompile(`^([A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3})$`)
	singleton  = regexp.MustCompile(`^[0-9A-WYZa-wyz]$`)
	extPartRE  = regexp.MustCompile(`^[A-Za-z0-9]{2,8}$`)
	primaryTag = regexp.MustCompile(`^[a-z]{2,3}$`)
)

// validLanguage is lex-schema's strict language check (@atproto/syntax's
// parseLanguageString): a BCP 47 tag with no repeated variant or
// extension singleton and a lower-case 2-3 letter primary language.
func validLanguage(s string) bool {
	if simpleLanguage(s) {
		return true
	}
	m := langRE.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	if m[lgGrand] != "" || m[lgPrivB] != "" {
		return true
	}
	tags := strings.Split(s, "-")
	i := 1
	if n := len(tags[0]); n == 2 || n == 3 {
		for c := 0; c < 3 && i < len(tags) && alpha3.MatchString(tags[i]); c++ {
			i++
		}
	}
	if i < len(tags) && alpha4.MatchString(tags[i]) {
		i++
	}
	if i < len(tags) && regionRE.MatchString(tags[i]) {
		i++
	}
	seen := map[string]bool{}
	for i < len(tags) && variantRE.MatchString(tags[i]) {
		k := "v" + strings.ToLower(tags[i])
		if seen[k] {
			return false
		}
		seen[k] = true
		i++
	}
	for i < len(tags) && singleton.MatchString(tags[i]) {
		k := "s" + strings.ToLower(tags[i])
		if seen[k] {
			return false
		}
		seen[k] = true
		i++
		for i < len(tags) && extPartRE.MatchString(tags[i]) {
			i++
		}
	}
	lang := m[lgLang]
	if lang == "" {
		return true
	}
	primary, _, _ := strings.Cut(lang, "-")
	return primaryTag.MatchString(primary)
}

// simpleLanguage takes the common tags ("en", "pt-BR", "es-419") without
// the regexp: a lower-case 2-3 letter language and maybe a region.
func simpleLanguage(s string) bool {
	lang, region, ok := strings.Cut(s, "-")
	if len(lang) < 2 || len(lang) > 3 {
		return false
	}
	for i := 0; i < len(lang); i++ {
		if lang[i] < 'a' || lang[i] > 'z' {
			return false
		}
	}
	if !ok {
		return true
	}
	switch len(region) {
	case 2:
		return isLetter(region[0]) && isLetter(region[1])
	case 3:
		return isDigit(region[0]) && isDigit(region[1]) && isDigit(region[2])
	}
	return false
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
