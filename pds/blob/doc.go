// Package blob keeps the blobs of fakepds's accounts: their bytes in files
// under the data dir, their metadata in each account's actor store (tables
// blob and record_blob), with the reference PDS's rules for when a blob
// may be served and when it is deleted.
//
// The life of a blob, as in the reference:
//
//   - Store.Stage reads the body whole (into memory, or a temporary file
//     past 64 KiB), names it by its CID (CIDv1, raw, sha2-256) and sniffs
//     its type, holding nothing shared while the client sends; then
//     Store.Commit, inside the account's actor store, puts the file in
//     place and records it as a temporary upload (temp_key set). A temporary blob is not served: getBlob answers
//     "Blob not found" until a record references it.
//   - A repo write, inside its transaction, calls Refs.Dissociate for each
//     record it updates or deletes and Refs.Associate for each record it
//     creates or updates. Associate makes a referenced blob permanent
//     (checking the ref's mimeType and size against the upload the first
//     time) or fails with the reference's BlobNotFound.
//   - Refs.Collect, last in that transaction, deletes the rows of blobs no
//     record references any more and returns them as Garbage; after the
//     transaction commits, Store.Sweep deletes their files. A transaction
//     that fails deletes nothing.
//   - Uploads that no record ever references stay, as in the reference
//     (whose disk blob store has no expiry for them), until the account is
//     deleted (Store.RemoveAccount).
//
// Files are at <dir>/<hh>/<sha256(did)>/<sha256 of the blob, hex>: no DID
// or CID can name a path outside dir. They are written to a temporary file
// in the same directory and renamed; with fsync on, the file and its
// directory are synced before the upload is acknowledged, with fsync off
// nothing is.
package blob
