// Package plc is a fake PLC directory: the registry that did:plc identifiers
// resolve through, kept in one SQLite file and served over HTTP with the
// public directory's API (https://plc.directory), so code under test
// resolves and updates did:plc identities through a PLC URL exactly as in
// production.
//
// DIDs are real: derived from signed genesis operations, with operations,
// signatures and CIDs from github.com/did-method-plc/go-didplc. Submit
// checks an operation as the reference server (did-method-plc's
// packages/server) does: the same structural rules and size limits, the
// rotation-key authority order, the 72-hour nullification window, the
// per-DID rate limits, and the same status codes and messages.
//
// A PDS uses a directory through Client: its own *Directory in process,
// or *Remote, another server's directory over this HTTP API, so several
// PDSes share one (pds.Config.PLCURL).
//
// Routes of Handler:
//
//	GET  /{did}            DID document (410 when tombstoned, 404 when unknown)
//	GET  /{did}/data       the document's data (rotation keys included)
//	GET  /{did}/log        operations, nullified ones left out
//	GET  /{did}/log/audit  every operation with cid, nullified and createdAt
//	GET  /{did}/log/last   the current operation (a tombstone too)
//	POST /{did}            submit a signed operation
//	GET  /export           JSON lines, by createdAt or (numeric after) by seq
//	GET  /_health          {"version": ...}
//
// Where it differs from the public directory, on purpose or not:
//
//   - GET /export/stream (the WebSocket feed) is not served.
//   - Sequence numbers are assigned when an operation is accepted, so every
//     operation is at once visible to /export?after=<seq>; the public
//     directory sequences in the background.
//   - /export's after accepts ISO 8601 timestamps only (JavaScript's Date
//     parser accepts more); a zone-less timestamp is read as UTC.
//   - Error messages of malformed JSON bodies come from Go's decoder, not
//     from Node's.
//   - Operation JSON keeps its fields in go-didplc's order; the public
//     directory returns them as Postgres jsonb stores them (shortest key
//     first). The order of entries in a DID document's arrays does follow
//     jsonb, since array order is part of the document.
//   - Operations of one DID are ordered by arrival, not by createdAt, so a
//     test clock moved backwards cannot reorder a log.
package plc
