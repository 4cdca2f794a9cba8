package xrpc

import "github.com/fakepds/fakepds/pds/jsvalue"

// AppendString appends s as a JSON string, byte for byte as WriteJSON's
// encoder (encoding/json, HTML escaping off) writes it: '"', '\\' and
// control characters escaped (\b, \f, \n, \r, \t short), invalid UTF-8 as
// \ufffd, U+2028 and U+2029 escaped (jsvalue.AppendGoQuote). Handlers that
// write fixed answers by hand quote their strings with it, for the bytes
// WriteJSON made.
func AppendString(dst []byte, s string) []byte { return jsvalue.AppendGoQuote(dst, s) }
