package pds

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bluesky-social/indigo/atproto/atdata"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/blob"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

func (s *Server) registerBlobs(x *xrpc.Mux) {
	s.handle(x, xrpc.Procedure, "com.atproto.repo.uploadBlob", authn{kind: authUploader}, s.uploadBlob)
	s.handle(x, xrpc.Query, "com.atproto.repo.listMissingBlobs", access(scopesStandard, check{}), s.listMissingBlobs)
	s.handle(x, xrpc.Query, "com.atproto.sync.getBlob", repoReader, s.getBlob)
	s.handle(x, xrpc.Query, "com.atproto.sync.listBlobs", repoReader, s.listBlobs)
}

// blobs is the store of the server's blob files. It is stateless (see
// blob.Store), so making one per call costs an allocation.
func (s *Server) blobs() *blob.Store {
	st := blob.New(filepath.Join(s.dataDir, "blobs"), s.cfg.Fsync)
	st.Rand = s.rand("blob-temp-keys")
	return st
}

// blobRefError answers a write whose records reference blobs badly, as
// the reference does (400 BlobNotFound, InvalidMimeType, InvalidSize);
// other errors pass through.
func blobRefError(err error) error {
	var re *blob.RefError
	if errors.As(err, &re) {
		return xrpc.InvalidRequest(re.Name, "%s", re.Message)
	}
	return err
}

const nsidUploadBlob = "com.atproto.repo.uploadBlob"

// stageAndCommitBlob reads the upload's body whole (into memory or a
// temporary file) before it takes did's actor store, so a client that
// stalls mid-body holds no handle other accounts need.
func (s *Server) stageAndCommitBlob(r *http.Request, did, mime string) (atdata.Blob, error) {
	body, err := xrpc.DecodedBody(r)
	if err != nil {
		return atdata.Blob{}, err
	}
	staged, err := s.blobs().Stage(blob.Upload{DID: did, Body: body, MimeType: mime, Limit: s.cfg.BlobUploadLimit})
	if err == nil {
		defer staged.Close()
		err = s.withActor(r.Context(), did, func(db *store.DB) error {
			_, err := s.blobs().Commit(r.Context(), db, staged, s.clock.Now())
			return err
		})
	}
	switch {
	case err == nil:
		return staged.Ref, nil
	case errors.Is(err, blob.ErrTooLarge):
		return atdata.Blob{}, xrpc.PayloadTooLarge()
	case errors.Is(err, blob.ErrTakendown):
		return atdata.Blob{}, xrpc.InvalidRequest("", "Blob has been takendown, cannot re-upload")
	case errors.Is(err, blob.ErrRead) && errors.Is(err, os.ErrDeadlineExceeded):
		return atdata.Blob{}, xrpc.ReadError(err)
	}
	// A body that does not decode (bad gzip or brotli) lands here too:
	// the reference answers it with a 500.
	return atdata.Blob{}, blobRefError(err)
}

func (s *Server) uploadBlob(w http.ResponseWriter, r *http.Request, c *caller) error {
	did := c.DID
	if !(r.ContentLength > 0 || len(r.TransferEncoding) > 0 || r.Header.Get("Content-Length") != "") {
		return xrpc.InvalidRequest("", "A request body is expected but none was provided")
	}
	mime, ok := requestMediaType(r.Header.Get("Content-Type"))
	if !ok {
		return xrpc.InvalidRequest("", "Request encoding (Content-Type) required but not provided")
	}
	if r.ContentLength > s.cfg.BlobUploadLimit {
		return xrpc.PayloadTooLarge()
	}
	ref, err := s.stageAndCommitBlob(r, did, mime)
	if err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, struct {
		Blob atdata.Blob `json:"blob"`
	}{ref})
	return nil
}

// uploadCaller authenticates uploadBlob as the reference does: a service
// auth token (one with an lxm claim, as a video service sends) or an
// access token of the standard scopes on an account not taken down.
func (s *Server) uploadCaller(r *http.Request) (*caller, error) {
	scheme, token, err := authHeader(r)
	if err != nil {
		return nil, err
	}
	if scheme == "BEARER" && token != "" {
		lxm, err := jwtHasLXM(token)
		if err != nil {
			// The reference's JWT decoding throws on a token that is not
			// one, and that answers 500.
			return nil, err
		}
		if lxm {
			iss, err := s.optionalServiceAuth(r, nsidUploadBlob)
			if err != nil {
				return nil, err
			}
			if _, err := s.accounts.ByDID(r.Context(), iss); errors.Is(err, account.ErrNotFound) {
				return nil, xrpc.InvalidRequest("RepoNotFound", "Could not find repo for DID: %s", iss)
			} else if err != nil {
				return nil, err
			}
			return &caller{DID: iss, Service: true}, nil
		}
	}
	return s.accessToken(r, scopesStandard)
}

// jwtHasLXM decodes a JWT's payload, unverified, for its lxm claim.
func jwtHasLXM(token string) (bool, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false, errors.New("uploadBlob: bearer token is not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false, fmt.Errorf("uploadBlob: JWT payload: %w", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		return false, fmt.Errorf("uploadBlob: JWT payload: %w", err)
	}
	return claims["lxm"] != nil, nil
}

// requestMediaType is the media type the reference reads from a request's
// Content-Type: what precedes the first ";", untouched (neither trimmed nor
// lowercased), or for a value without "/", the type of that file
// extension.
func requestMediaType(ct string) (string, bool) {
	if ct == "" {
		return "", false
	}
	if !strings.Contains(ct, "/") {
		mt, ok := extensionTypes[strings.ToLower(ct)]
		return mt, ok
	}
	mt, _, _ := strings.Cut(ct, ";")
	return mt, mt != ""
}

// extensionTypes answers a Content-Type that is a bare file extension, for
// the extensions a client plausibly sends (npm mime-types has them all).
var extensionTypes = map[string]string{
	"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
	"webp": "image/webp", "avif": "image/avif", "heic": "image/heic", "svg": "image/svg+xml",
	"bmp": "image/bmp", "ico": "image/vnd.microsoft.icon", "tif": "image/tiff", "tiff": "image/tiff",
	"jxl": "image/jxl", "json": "application/json", "txt": "text/plain", "text": "text/plain",
	"html": "text/html", "htm": "text/html", "css": "text/css", "js": "text/javascript",
	"mjs": "text/javascript", "xml": "application/xml", "pdf": "application/pdf",
	"zip": "application/zip", "gz": "application/gzip", "mp4": "video/mp4", "m4v": "video/x-m4v",
	"mov": "video/quicktime", "webm": "video/webm", "mkv": "video/x-matroska", "mp3": "audio/mpeg",
	"m4a": "audio/mp4", "ogg": "audio/ogg", "oga": "audio/ogg", "opus": "audio/ogg",
	"wav": "audio/wav", "flac": "audio/x-flac", "aac": "audio/aac", "csv": "text/csv",
	"md": "text/markdown", "bin": "application/octet-stream", "wasm": "application/wasm",
	"avi": "video/x-msvideo", "mpeg": "video/mpeg", "mpg": "video/mpeg",
}

func (s *Server) getBlob(w http.ResponseWriter, r *http.Request, c *caller) error {
	did := param(r, "did")
	ref, err := paramCID(r, "cid")
	if err != nil {
		return err
	}
	blobCID := *ref
	acc, err := s.availableRepo(r.Context(), c, did)
	if err != nil {
		return err
	}
	var content *blob.Content
	err = s.withActor(r.Context(), acc.DID, func(db *store.DB) error {
		return db.Query(func(q store.Querier) error {
			var err error
			content, err = s.blobs().Open(r.Context(), q, acc.DID, blobCID)
			return err
		})
	})
	if errors.Is(err, blob.ErrNotFound) {
		return xrpc.InvalidRequest("", "Blob not found")
	}
	if err != nil {
		return err
	}
	defer content.Close()
	h := w.Header()
	h.Set("Content-Length", strconv.FormatInt(content.Size, 10))
	// The reference's security headers: never sniff, never render inline,
	// never run anything.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", `attachment; filename="`+blobCID.String()+`"`)
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Content-Type", withCharset(content.MimeType))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		// A file's *os.File: net/http sends it with sendfile.
		_, _ = io.CopyN(w, content.Reader, content.Size)
	}
	return nil
}

// withCharset adds the charset Express adds to a Content-Type it is given
// bare: utf-8 for text/* and JavaScript or JSON.
func withCharset(mt string) string {
	if mt == "" {
		mt = "application/octet-stream"
	}
	if strings.HasPrefix(mt, "text/") || strings.HasPrefix(mt, "application/javascript") || strings.HasPrefix(mt, "application/json") {
		return mt + "; charset=utf-8"
	}
	return mt
}

func (s *Server) listBlobs(w http.ResponseWriter, r *http.Request, c *caller) error {
	did, since, limit := param(r, "did"), param(r, "since"), paramInt(r, "limit", 500)
	acc, err := s.availableRepo(r.Context(), c, did)
	if err != nil {
		return err
	}
	var cids []string
	err = s.withActor(r.Context(), acc.DID, func(db *store.DB) error {
		return db.Query(func(q store.Querier) error {
			var err error
			cids, err = blob.List(r.Context(), q, acc.DID, since, param(r, "cursor"), limit)
			return err
		})
	})
	if err != nil {
		return err
	}
	out := struct {
		Cursor string   `json:"cursor,omitempty"`
		CIDs   []string `json:"cids"`
	}{CIDs: cids}
	if len(cids) > 0 {
		out.Cursor = cids[len(cids)-1]
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listMissingBlobs(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit := paramInt(r, "limit", 500)
	var missing []blob.Missing
	err := s.withActor(r.Context(), c.DID, func(db *store.DB) error {
		return db.Query(func(q store.Querier) error {
			var err error
			missing, err = blob.ListMissing(r.Context(), q, r.URL.Query().Get("cursor"), limit)
			return err
		})
	})
	if err != nil {
		return err
	}
	out := struct {
		Blobs  []blob.Missing `json:"blobs"`
		Cursor string         `json:"cursor,omitempty"`
	}{Blobs: missing}
	if len(missing) > 0 {
		out.Cursor = missing[len(missing)-1].CID
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}
