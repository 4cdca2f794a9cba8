// Package blob keeps the blobs of fakepds's accounts: their metadata in
// each account's actor store (tables blob and record_blob), the bytes of a
// small blob there too and those of a large one in a file under the data
// dir, with the reference PDS's rules for when a blob may be served and
// when it is deleted.
//
// The life of a blob, as in the reference:
//
//   - Store.Stage reads the body whole (into memory below 64 KiB, else a
//     temporary file), names it by its CID (CIDv1, raw, sha2-256) and
//     sniffs its type, holding nothing shared while the client sends; then
//     Store.Commit, in a transaction of the account's actor store, records
//     it as a temporary upload (temp_key set) with its bytes in the row (a
//     small blob) or its file renamed into place. A temporary blob is not
//     served: getBlob answers "Blob not found" until a record references it.
//   - A repo write, inside its transaction, calls Refs.Dissociate for each
//     record it updates or deletes and Refs.Associate for each record it
//     creates or updates. Associate makes a referenced blob permanent
//     (checking the ref's mimeType and size against the upload the first
//     time) or fails with the reference's BlobNotFound.
//   - Refs.Collect, last in that transaction, deletes the rows of blobs no
//     record references any more (a small blob's bytes with them) and
//     returns them as Garbage; after the transaction commits, Store.Sweep
//     deletes their files. A transaction that fails deletes nothing.
//   - Uploads that no record ever references stay, as in the reference
//     (whose disk blob store has no expiry for them), until the account is
//     deleted (Store.RemoveAccount).
//
// A small blob in its row costs an upload one transaction: a file cost
// the account's directory on its first upload and a file creation on every
// one, most of uploadBlob's time in a test suite. Files (blobs of 64 KiB
// and more) are at <dir>/<hh>/<sha256(did)>/<sha256 of the blob, hex>: no
// DID or CID can name a path outside dir. They are written to a temporary
// file in the same directory and renamed; with fsync on, the file and its
// directory are synced before the upload is acknowledged (a row's bytes
// with the transaction's WAL sync), with fsync off nothing is.
package blob
