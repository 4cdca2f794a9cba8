// Package jsvalue holds the JavaScript semantics that show in the reference
// PDS's answers (npm @atproto/pds runs on Node): how a value is printed
// (Number::toString, String(v), JSON.stringify of a string), parseInt,
// String.prototype.length in UTF-16 code units, white space as
// String.prototype.trim and \s see it, the order in which an object's keys
// are enumerated, and the short preview of a value that @atproto/lex-schema's
// validation messages quote ("Expected string value type (got 123)").
//
// Each function follows the ECMAScript (ES2024) definition it names; the
// tests hold them to values Node prints.
package jsvalue
