package pds

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ipfs/go-cid"
)

// This file holds what handlers share to read a call and answer it.

// The mux checked a call's query parameters against its lexicon before the
// handler runs (lexval.CheckParams, with the reference's messages), so
// handlers read them without checks or messages of their own. An empty
// value is an absent one, as the reference's query parsing has it.

// param is the parameter name's value, "" when absent.
func param(r *http.Request, name string) string { return r.URL.Query().Get(name) }

// paramInt is an integer parameter, def when absent.
func paramInt(r *http.Request, name string, def int) int { return queryInt(r.URL.Query(), name, def) }

// queryInt is paramInt of a query already parsed (each r.URL.Query()
// parses it again).
func queryInt(q url.Values, name string, def int) int {
	if n, err := strconv.Atoi(q.Get(name)); err == nil {
		return n
	}
	return def
}

// paramList is an array parameter (name=a&name=b), empty values left out.
func paramList(r *http.Request, name string) []string {
	var out []string
	for _, v := range r.URL.Query()[name] {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// paramCID is a CID parameter, nil when absent.
func paramCID(r *http.Request, name string) (*cid.Cid, error) { return queryCID(r.URL.Query(), name) }

// queryCID is paramCID of a query already parsed.
func queryCID(q url.Values, name string) (*cid.Cid, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	c, err := cid.Decode(v)
	if err != nil {
		return nil, fmt.Errorf("%s: a CID the lexicon passed: %w", name, err)
	}
	return &c, nil
}

// noOutput answers a procedure that has no output: 200, an empty body.
func noOutput(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusOK)
	return nil
}
