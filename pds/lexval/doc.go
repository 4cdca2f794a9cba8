// Package lexval checks and converts the records of repo writes
// (createRecord, putRecord, applyWrites) as the reference PDS
// (npm @atproto/pds 0.5.35) does, and prints stored records back as JSON.
// It also checks every XRPC method's query parameters ([CheckParams]) and
// JSON input ([CheckInput]) from the same lexicons, for pds/xrpc's front
// door.
//
// [Prepare] takes a record as the JSON of the request and returns its
// DAG-CBOR bytes, CID, the blobs it references and its validationStatus,
// or an [*Error] with the reference's message for a 400 InvalidRequest:
//
//   - validate unset: a known record type is validated ("valid"), an
//     unknown collection is taken as is ("unknown");
//   - validate=true: an unknown collection is refused ("Unknown lexicon
//     type: ..."), a known one validated;
//   - validate=false: no lexicon check (the reference then leaves
//     validationStatus out: [StatusNone]).
//
// Whatever validate says, a "$type" other than the collection is refused,
// a missing one is added, and legacy blobs ({"cid","mimeType"}) are
// refused. Validation checks the record key against the lexicon's key type
// (tid, nsid, any, literal:self) before the record.
//
// The lexicons are embedded (lexicons/, see its README) and compiled per
// record type on first use, so the server's startup does not pay for them.
// Schemas come from indigo's atproto/lexicon package; validation itself
// follows @atproto/lex-schema, the reference's validator, whose messages
// ("Invalid app.bsky.feed.post record: Expected string value type (got
// 123) at $.record.text") and checking order indigo's validator does not
// reproduce. The reference's string format rules are used where they
// differ from indigo's syntax package (datetime, uri, at-uri, cid,
// language).
//
// The tests hold the package to the reference's own code: testdata/
// oracle.mjs runs the cases of testdata/cases.json through the installed
// @atproto/pds and records its answers (messages, CIDs, blobs, JSON), the
// string formats it accepts, and the compiled schemas it validates with.
//
// Known differences: grapheme counts use uniseg v0.4.7 (Unicode 15.0) where the
// reference uses ICU (Intl.Segmenter), which can differ for newer emoji
// and scripts; record keys are not checked for slurs; a string with a lone
// surrogate escape is stored (and quoted in messages) with U+FFFD.
package lexval
