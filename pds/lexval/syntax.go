package lexval

import "strings"

// Regexp-free versions of indigo's syntax parsers (ParseNSID, ParseHandle,
// ParseDID), which run a backtracking regexp on every call: an XRPC path,
// a write's collection, its repo. Each takes exactly what the syntax
// parser takes (FuzzSyntax and TestSyntaxExhaustive hold them to it).

// ValidNSID reports whether syntax.ParseNSID takes s.
func ValidNSID(s string) bool {
	if s == "" || len(s) > 317 {
		return false
	}
	// ^[a-zA-Z]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?
	// (\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+
	// (\.[a-zA-Z]([a-zA-Z0-9]{0,62})?)$
	// No part holds a '.', so the parts are what lies between the dots.
	n := 0
	for rest := s; ; n++ {
		part, after, more := strings.Cut(rest, ".")
		rest = after
		switch {
		case !more: // the name
			return n >= 2 && len(part) >= 1 && len(part) <= 63 && isLetter(part[0]) && alnum(part)
		case n == 0:
			if !dnsLabel(part) || !isLetter(part[0]) {
				return false
			}
		default:
			if !dnsLabel(part) {
				return false
			}
		}
	}
}

// ValidRecordKey reports whether syntax.ParseRecordKey takes s.
func ValidRecordKey(s string) bool { return validRecordKey(s) }

// validHandle reports whether syntax.ParseHandle takes s.
func validHandle(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	// ^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+
	// [a-zA-Z]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$
	n := 0
	for rest := s; ; n++ {
		part, after, more := strings.Cut(rest, ".")
		rest = after
		if !dnsLabel(part) {
			return false
		}
		if !more {
			return n >= 1 && isLetter(part[0])
		}
	}
}

// validDID reports whether syntax.ParseDID takes s.
func validDID(s string) bool {
	if s == "" || len(s) > 2*1024 || len(s) < 4 || s[:4] != "did:" {
		return false
	}
	// ^did:[a-z]+:[a-zA-Z0-9._:%-]*[a-zA-Z0-9._-]$ (the method holds no ':')
	i := 4
	for i < len(s) && s[i] >= 'a' && s[i] <= 'z' {
		i++
	}
	if i == 4 || i == len(s) || s[i] != ':' {
		return false
	}
	id := s[i+1:]
	if id == "" {
		return false
	}
	for j := 0; j < len(id); j++ {
		switch c := id[j]; {
		case isLetter(c) || isDigit(c) || c == '.' || c == '_' || c == '-':
		case (c == ':' || c == '%') && j < len(id)-1:
		default:
			return false
		}
	}
	return true
}

// dnsLabel: [a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?
func dnsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLetter(c) && !isDigit(c) && c != '-' {
			return false
		}
	}
	return true
}

func alnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLetter(c) && !isDigit(c) {
			return false
		}
	}
	return true
}
