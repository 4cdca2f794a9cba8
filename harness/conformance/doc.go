// Package conformance is fakepds's differential test against the reference
// PDS (npm @atproto/pds): scenarios written once against the harness API
// and plain XRPC, run against every backend (inprocess, reference,
// docker), each producing a transcript that must equal the golden one
// recorded from the npm reference, except for the differences listed in
// Known (mirrored by docs/known-differences.md).
//
// A transcript is a list of steps: the call, its HTTP status, content
// type and XRPC error name, and the JSON shape of the body, with what
// changes from run to run (DIDs, CIDs, TIDs, handles, emails, JWTs,
// timestamps, free text) replaced by placeholders numbered in order of
// appearance, so that "the same CID again" still shows; firehose captures
// are steps too, with the frames as sent (type, fields present, absent or
// null, ops). The goldens live in testdata/, one file per scenario.
//
//	go test ./harness/conformance                 # inprocess against the goldens (part of make test)
//	make conformance                              # inprocess, reference and docker, and the report
//	HARNESS_PDS_BACKEND=reference go test ./harness/conformance -update   # re-record the goldens
//
// Flags (after the package): -update rewrites the goldens from the
// reference backend; -backends=inprocess,reference,docker picks the
// backends (default: inprocess and HARNESS_PDS_BACKEND); -report=FILE
// writes the scenarios x backends table as markdown.
package conformance
