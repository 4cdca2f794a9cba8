// Package xrpc serves XRPC methods over net/http, as one front door for
// every method: routing by NSID, the query/procedure HTTP method rules, the
// method's params and JSON input checked from its lexicon (pds/lexval) and
// decoded, the auth it declared at registration applied between the two
// (the reference's order: params, auth, input), request body limits, and
// the error envelope {"error": Name, "message": ...} with the names and
// statuses the reference PDS answers with. See [Handle] and [HandleInput].
package xrpc

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an XRPC error: an HTTP status, an error name and a message.
type Error struct {
	Status  int
	Name    string
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Name
	}
	return e.Name + ": " + e.Message
}

// Errorf returns an Error with a formatted message.
func Errorf(status int, name, format string, args ...any) *Error {
	return &Error{Status: status, Name: name, Message: fmt.Sprintf(format, args...)}
}

// Default names per status: what the reference answers when a handler gives
// no custom name, with its default messages.
var statusNames = map[int][2]string{
	400: {"InvalidRequest", "Invalid Request"},
	401: {"AuthenticationRequired", "Authentication Required"},
	403: {"Forbidden", "Forbidden"},
	404: {"XRPCNotSupported", "XRPC Not Supported"},
	406: {"NotAcceptable", "Not Acceptable"},
	413: {"PayloadTooLarge", "Payload Too Large"},
	415: {"UnsupportedMediaType", "Unsupported Media Type"},
	429: {"RateLimitExceeded", "Rate Limit Exceeded"},
	500: {"InternalServerError", "Internal Server Error"},
	501: {"MethodNotImplemented", "Method Not Implemented"},
	502: {"UpstreamFailure", "Upstream Failure"},
	503: {"NotEnoughResources", "Not Enough Resources"},
	504: {"UpstreamTimeout", "Upstream Timeout"},
}

// InvalidRequest is a 400 error. name may be empty for the plain
// InvalidRequest the reference uses for most bad input.
func InvalidRequest(name, format string, args ...any) *Error {
	return withDefaultName(Errorf(http.StatusBadRequest, name, format, args...))
}

// AuthRequired is a 401 error; an empty name means AuthenticationRequired.
func AuthRequired(name, format string, args ...any) *Error {
	return withDefaultName(Errorf(http.StatusUnauthorized, name, format, args...))
}

// Forbidden is a 403 error.
func Forbidden(format string, args ...any) *Error {
	return withDefaultName(Errorf(http.StatusForbidden, "", format, args...))
}

// NotImplemented is the 501 a method this server does not serve answers.
func NotImplemented() *Error {
	return withDefaultName(&Error{Status: http.StatusNotImplemented})
}

// PayloadTooLarge is the 413 for a request body over its limit.
func PayloadTooLarge() *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Name: "PayloadTooLarge", Message: "request entity too large"}
}

func withDefaultName(e *Error) *Error {
	d, ok := statusNames[e.Status]
	if e.Name == "" {
		if ok {
			e.Name = d[0]
		} else {
			e.Name = http.StatusText(e.Status)
		}
	}
	if e.Message == "" && ok {
		e.Message = d[1]
	}
	return e
}

// internal is what any error that is not an *Error becomes: a 500 whose
// message gives nothing away, as the reference's.
var internal = &Error{Status: 500, Name: "InternalServerError", Message: "Internal Server Error"}

// asError turns err into the Error the client sees.
func asError(err error) *Error {
	var xe *Error
	if errors.As(err, &xe) {
		e := *xe
		if e.Status < 400 || e.Status > 599 {
			return internal
		}
		if e.Status == 500 {
			// Never send a 500's details: they are ours, not the client's.
			e.Message = internal.Message
		}
		return withDefaultName(&e)
	}
	return internal
}
