package plc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
	"github.com/mr-tron/base58"

	"github.com/fakepds/fakepds/pds/jsvalue"
)

// Kinds of refused operation. Submit returns an *OpError wrapping one of
// them; errors.Is tells them apart.
var (
	// ErrInvalidOperation: not an operation the directory accepts (shape,
	// size or limits).
	ErrInvalidOperation = errors.New("plc: invalid operation")
	// ErrInvalidSignature: not signed by a key allowed to sign it.
	ErrInvalidSignature = errors.New("plc: invalid signature")
	// ErrMisordered: prev names no current operation of the DID, a genesis
	// for a DID that exists, or an operation after a tombstone.
	ErrMisordered = errors.New("plc: operations not correctly ordered")
	// ErrGenesisHash: the genesis operation derives another DID.
	ErrGenesisHash = errors.New("plc: genesis operation does not match the DID")
	// ErrLateRecovery: a nullification more than 72 hours after the first
	// operation it nullifies.
	ErrLateRecovery = errors.New("plc: recovery outside the 72h window")
	// ErrRateLimited: too many operations for the DID lately.
	ErrRateLimited = errors.New("plc: too many operations")
)

// OpError is an operation the directory refused: the status and message
// the public directory answers POST /{did} with ({"message": Message}).
type OpError struct {
	Kind    error // one of the Err* kinds above
	Status  int
	Message string
}

func (e *OpError) Error() string { return fmt.Sprintf("plc: %d %s", e.Status, e.Message) }

// Unwrap returns the kind, for errors.Is.
func (e *OpError) Unwrap() error { return e.Kind }

// The reference's messages, typos included: clients match on them.
func invalidOp(msg string) error { return &OpError{ErrInvalidOperation, http.StatusBadRequest, msg} }
func misordered() error {
	return &OpError{ErrMisordered, http.StatusBadRequest, "Operations not correctly ordered"}
}
func invalidSig(op string) error {
	return &OpError{ErrInvalidSignature, http.StatusBadRequest, "Invalid signature on op: " + op}
}

// Signatures that are not base64url at all make the reference's decoder
// throw a plain Error, which its error handler turns into a 500.
var malformedSig = &OpError{ErrInvalidSignature, http.StatusInternalServerError, "Internal Server Error"}

// Limits of the reference's POST /{did} (packages/server/src/constraints.ts).
const (
	maxOpBytes                   = 4000 // DAG-CBOR, signature included
	maxAKAEntries                = 10
	maxAKALength                 = 258 // a 253-byte handle and "at://"
	maxRotationEntries           = 10
	maxServiceEntries            = 10
	maxServiceTypeLength         = 256
	maxServiceEndpointLength     = 512
	maxVerificationMethodEntries = 10
	maxIDLength                  = 32
	maxDIDKeyLength              = 256

	recoveryWindow = 72 * time.Hour
	hourLimit      = 10
	dayLimit       = 30
	weekLimit      = 100
)

// Submit validates op as the public directory validates POST /{did} and
// appends it to the DID's log: a genesis operation creates the DID, an
// operation whose prev is not the DID's current one nullifies what came
// after prev (when signed by a more authoritative rotation key, within 72
// hours). A refusal is an *OpError. Submits for one DID are serialized:
// the DID's head is read in the write transaction.
func (d *Directory) Submit(ctx context.Context, did syntax.DID, op didplc.Operation) error {
	if op == nil {
		return invalidOp("Not a valid operation: undefined")
	}
	// Through JSON, so a Go caller meets exactly the checks an HTTP client
	// does (a nil slice is JSON null, which the directory refuses).
	b, err := jsvalue.Marshal(op)
	if err != nil {
		return fmt.Errorf("plc: %w", err)
	}
	in, err := parseIncoming(b)
	if err != nil {
		return err
	}
	return d.add(ctx, string(did), in)
}

// ParseOperation decodes a JSON operation as POST /{did} does: a
// "plc_operation" or a "plc_tombstone" with exactly its fields, within the
// directory's limits. It returns a *didplc.RegularOp or a
// *didplc.TombstoneOp, or an *OpError.
func ParseOperation(b []byte) (didplc.Operation, error) {
	in, err := parseIncoming(b)
	if err != nil {
		return nil, err
	}
	return in.op, nil
}

// incoming is an operation that passed the stateless checks.
type incoming struct {
	op didplc.Operation
	// as is the operation as the client sent it, compact: the reference
	// quotes JSON.stringify(op) in its messages.
	as string
}

func parseIncoming(b []byte) (*incoming, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, invalidOp(err.Error())
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, invalidOp(err.Error())
	}
	in := &incoming{as: compact.String()}
	in.op = shape(v)
	if in.op == nil {
		return nil, invalidOp("Not a valid operation: " + in.as)
	}
	if len(in.op.SignedCBORBytes()) > maxOpBytes {
		return nil, invalidOp(fmt.Sprintf("Operation too large (%d bytes maximum in cbor encoding)", maxOpBytes))
	}
	if r, ok := in.op.(*didplc.RegularOp); ok {
		if err := checkLimits(r); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// shape returns the operation v holds when it has exactly the fields of a
// signed plc_operation or plc_tombstone with their JSON types (the
// reference's strict zod schemas), nil otherwise. Slices and maps come out
// non-nil, so they encode as empty CBOR arrays and maps, not null.
func shape(v any) didplc.Operation {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	sig, ok := m["sig"].(string)
	if !ok {
		return nil
	}
	switch m["type"] {
	case "plc_operation":
		rot, ok1 := strs(m["rotationKeys"])
		vms, ok2 := strMap(m["verificationMethods"])
		aka, ok3 := strs(m["alsoKnownAs"])
		svcs, ok4 := services(m["services"])
		prevV, ok5 := m["prev"]
		prev, isStr := prevV.(string)
		if len(m) != 7 || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || (prevV != nil && !isStr) {
			return nil
		}
		op := &didplc.RegularOp{Type: "plc_operation", RotationKeys: rot, VerificationMethods: vms,
			AlsoKnownAs: aka, Services: svcs, Sig: &sig}
		if isStr {
			op.Prev = &prev
		}
		return op
	case "plc_tombstone":
		prev, ok := m["prev"].(string)
		if len(m) != 3 || !ok {
			return nil
		}
		return &didplc.TombstoneOp{Type: "plc_tombstone", Prev: prev, Sig: &sig}
	}
	return nil
}

func strs(v any) ([]string, bool) {
	a, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(a))
	for i, e := range a {
		if out[i], ok = e.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

func strMap(v any) (map[string]string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		if out[k], ok = e.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

func services(v any) (map[string]didplc.OpService, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]didplc.OpService, len(m))
	for k, e := range m {
		s, ok := strMap(e)
		if !ok || len(s) != 2 {
			return nil, false
		}
		typ, ok1 := s["type"]
		endpoint, ok2 := s["endpoint"]
		if !ok1 || !ok2 {
			return nil, false
		}
		out[k] = didplc.OpService{Type: typ, Endpoint: endpoint}
	}
	return out, true
}

// checkLimits applies the reference's per-field limits, in its order.
// Map entries are checked in jsonb order, so of several offenders the
// one reported does not depend on Go's map iteration.
func checkLimits(op *didplc.RegularOp) error {
	if len(op.AlsoKnownAs) > maxAKAEntries {
		return invalidOp(fmt.Sprintf("To many alsoKnownAs entries (max %d)", maxAKAEntries))
	}
	seen := make(map[string]bool, len(op.AlsoKnownAs))
	for _, aka := range op.AlsoKnownAs {
		if jsvalue.Length(aka) > maxAKALength {
			return invalidOp(fmt.Sprintf("alsoKnownAs entry too long (max %d): %s", maxAKALength, aka))
		}
		if seen[aka] {
			return invalidOp("duplicate alsoKnownAs entry: " + aka)
		}
		seen[aka] = true
	}
	if len(op.RotationKeys) > maxRotationEntries {
		return invalidOp(fmt.Sprintf("Too many rotationKey entries (max %d)", maxRotationEntries))
	}
	for _, key := range op.RotationKeys {
		if _, err := parsePublicKey(key); err != nil {
			return invalidOp("Invalid rotationKey: " + key)
		}
	}
	if len(op.Services) > maxServiceEntries {
		return invalidOp(fmt.Sprintf("To many service entries (max %d)", maxServiceEntries))
	}
	for _, id := range jsonbOrder(op.Services) {
		s := op.Services[id]
		switch {
		case jsvalue.Length(id) > maxIDLength:
			return invalidOp(fmt.Sprintf("Service id too long (max %d): %s", maxIDLength, id))
		case jsvalue.Length(s.Type) > maxServiceTypeLength:
			return invalidOp(fmt.Sprintf("Service type too long (max %d)", maxServiceTypeLength))
		case jsvalue.Length(s.Endpoint) > maxServiceEndpointLength:
			return invalidOp(fmt.Sprintf("Service endpoint too long (max %d)", maxServiceEndpointLength))
		}
	}
	if len(op.VerificationMethods) > maxVerificationMethodEntries {
		return invalidOp(fmt.Sprintf("Too many Verification Method entries (max %d)", maxVerificationMethodEntries))
	}
	for _, id := range jsonbOrder(op.VerificationMethods) {
		key := op.VerificationMethods[id]
		switch {
		case jsvalue.Length(id) > maxIDLength:
			return invalidOp(fmt.Sprintf("Verification Method id too long (max %d): %s", maxIDLength, id))
		case jsvalue.Length(key) > maxDIDKeyLength:
			return invalidOp(fmt.Sprintf("Verification Method key too long (max %d): %s", maxDIDKeyLength, key))
		case !didKeySyntax(key):
			return invalidOp("Invalid verificationMethod key: " + key)
		}
	}
	return nil
}

// didKeySyntax is the reference's minimal check of a verification method:
// a did:key whose multibase is base58btc, of any key type (a verification
// method need not be a key this directory could verify with).
func didKeySyntax(key string) bool {
	mb, ok := strings.CutPrefix(key, "did:key:")
	if !ok {
		return false
	}
	enc, ok := strings.CutPrefix(mb, "z")
	if !ok {
		return false
	}
	if enc == "" {
		return true
	}
	_, err := base58.Decode(enc)
	return err == nil
}

// verifySig returns the index of the first of keys that signed op, as the
// reference's assureValidSig does; as is op's JSON for the message.
func verifySig(keys []string, op didplc.Operation, as string) (int, error) {
	var sig string
	switch o := op.(type) {
	case *didplc.RegularOp:
		sig = derefOr(o.Sig)
	case *didplc.TombstoneOp:
		sig = derefOr(o.Sig)
	}
	if strings.HasSuffix(sig, "=") {
		return -1, invalidSig(as)
	}
	// Go's decoder skips CR and LF; the reference's refuses them.
	if _, err := base64.RawURLEncoding.Strict().DecodeString(sig); err != nil || strings.ContainsAny(sig, "\r\n") {
		return -1, malformedSig
	}
	i, err := verifyAny(op, keys)
	if err != nil {
		return -1, invalidSig(as)
	}
	return i, nil
}

func derefOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// checkCreation is the reference's assureValidCreationOp for a DID with no
// operation yet; it needs no database state.
func checkCreation(did string, op didplc.Operation, as string) error {
	if _, ok := op.(*didplc.TombstoneOp); ok {
		return misordered()
	}
	if _, err := verifySig(op.EquivalentRotationKeys(), op, as); err != nil {
		return err
	}
	if want := derivedDID(op); want != did {
		return &OpError{ErrGenesisHash, http.StatusBadRequest,
			"Hash of genesis operation does not match DID identifier: " + want}
	}
	if !op.IsGenesis() {
		// Unreachable but for a hash collision; "[object Object]" is what
		// the reference's template literal makes of the operation.
		return invalidOp("Improperly formatted operation, expected null prev on create: [object Object]")
	}
	return nil
}

// derivedDID is the DID op would create.
func derivedDID(op didplc.Operation) string {
	if did, err := op.DID(); err == nil {
		return did
	}
	// go-didplc derives only from a genesis operation; the reference hashes
	// whatever it was handed and names the result in its error.
	sum := sha256.Sum256(op.SignedCBORBytes())
	return "did:plc:" + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:])[:24])
}

// add is the reference's validateAndAddOp: the checks that need the DID's
// log, then the append, in one write transaction.
func (d *Directory) add(ctx context.Context, did string, in *incoming) error {
	op := in.op
	stored, err := jsvalue.Marshal(op)
	if err != nil {
		return fmt.Errorf("plc: %w", err)
	}
	cid := op.CID().String()
	// A genesis operation is checked against itself only: do the crypto
	// before taking the writer, and use the verdict if the DID is new.
	var creationErr error
	if op.IsGenesis() {
		creationErr = checkCreation(did, op, in.as)
	}
	return d.db.Write(ctx, func(tx *sql.Tx) error {
		now := d.now().UnixMilli()
		live, err := scanEntries(tx.StmtContext(ctx, d.liveStmt).QueryContext(ctx, did))
		if err != nil {
			return fmt.Errorf("plc: %w", err)
		}
		if len(live) == 0 {
			err := creationErr
			if !op.IsGenesis() {
				err = checkCreation(did, op, in.as)
			}
			if err != nil {
				return err
			}
			return d.insert(ctx, tx, did, cid, stored, now)
		}

		prev := op.PrevCIDStr()
		at := -1
		for i, e := range live {
			if e.cid == prev {
				at = i
				break
			}
		}
		if prev == "" || at < 0 {
			return misordered()
		}
		last, err := decodeOp(live[at].op)
		if err != nil {
			return err
		}
		if _, ok := last.(*didplc.TombstoneOp); ok {
			return misordered()
		}
		keys := last.EquivalentRotationKeys()
		nullified := live[at+1:]

		if len(nullified) == 0 {
			if _, err := verifySig(keys, op, in.as); err != nil {
				return err
			}
			// Recovery (below) is exempt, so a thief cannot lock the owner out.
			if !d.noRateLimit {
				if err := rateLimit(live, now); err != nil {
					return err
				}
			}
			return d.insert(ctx, tx, did, cid, stored, now)
		}

		// Nullification: only a key above the one that signed the first
		// operation being undone may rewrite history.
		first, err := decodeOp(nullified[0].op)
		if err != nil {
			return err
		}
		signer, err := verifySig(keys, first, string(nullified[0].op))
		if err != nil {
			return err
		}
		if _, err := verifySig(keys[:signer], op, in.as); err != nil {
			return err
		}
		if now <= live[len(live)-1].createdAt {
			return misordered()
		}
		if lapsed := now - nullified[0].createdAt; lapsed > recoveryWindow.Milliseconds() {
			return &OpError{ErrLateRecovery, http.StatusBadRequest, fmt.Sprintf(
				"Recovery operation occurred outside of the allowed 72 hr recovery window. Time lapsed: %d", lapsed)}
		}
		if _, err := tx.StmtContext(ctx, d.nullifyStmt).ExecContext(ctx, did, live[at].seq); err != nil {
			return fmt.Errorf("plc: %w", err)
		}
		return d.insert(ctx, tx, did, cid, stored, now)
	})
}

func (d *Directory) insert(ctx context.Context, tx *sql.Tx, did, cid string, op []byte, now int64) error {
	if _, err := tx.StmtContext(ctx, d.insertStmt).ExecContext(ctx, did, cid, op, now); err != nil {
		return fmt.Errorf("plc: %w", err)
	}
	return nil
}

// rateLimit is the reference's enforceOpsRateLimit over the DID's current
// (non-nullified) operations.
func rateLimit(live []entry, now int64) error {
	hour := time.Hour.Milliseconds()
	day := 24 * hour
	var inHour, inDay, inWeek int
	for _, e := range live {
		if e.createdAt > now-7*day {
			if inWeek++; inWeek >= weekLimit {
				return &OpError{ErrRateLimited, http.StatusBadRequest, fmt.Sprintf("To many operations within last week (max %d)", weekLimit)}
			}
		}
		if e.createdAt > now-day {
			if inDay++; inDay >= dayLimit {
				return &OpError{ErrRateLimited, http.StatusBadRequest, fmt.Sprintf("To many operations within last day (max %d)", dayLimit)}
			}
		}
		if e.createdAt > now-hour {
			if inHour++; inHour >= hourLimit {
				return &OpError{ErrRateLimited, http.StatusBadRequest, fmt.Sprintf("To many operations within last hour (max %d)", hourLimit)}
			}
		}
	}
	return nil
}
