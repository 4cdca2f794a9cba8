package plc

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
)

// Fields are the atproto parts of an operation, as a PDS sets them. In
// CreateUpdate a zero field keeps the previous operation's value.
type Fields struct {
	// RotationKeys are the did:keys that may sign the next operation, most
	// authoritative first. CreateGenesis defaults them to the signer's key.
	RotationKeys []string
	// SigningKey is the did:key of the repo signing key, published as the
	// "atproto" verification method.
	SigningKey string
	// Handle is published in alsoKnownAs as at://<handle>.
	Handle syntax.Handle
	// PDS is the endpoint of the "atproto_pds" service (type
	// AtprotoPersonalDataServer); https:// is prepended when it has no
	// http(s) scheme, as the reference's client does.
	PDS string
}

// CreateGenesis builds and signs (with signer, which should hold one of
// the rotation keys) the genesis operation of a new atproto account, and
// returns the DID it derives.
//
// didplc.NewAtproto does not fit a PDS: it publishes the signer as the
// repo signing key, where a PDS signs with its rotation key and publishes
// the account's own key, and it leaves the operation's type empty.
func CreateGenesis(signer atcrypto.PrivateKey, f Fields) (syntax.DID, *didplc.RegularOp, error) {
	op := &didplc.RegularOp{
		Type:                "plc_operation",
		RotationKeys:        slices.Clone(f.RotationKeys),
		VerificationMethods: map[string]string{},
		AlsoKnownAs:         []string{},
		Services:            map[string]didplc.OpService{},
	}
	if len(op.RotationKeys) == 0 {
		pub, err := signer.PublicKey()
		if err != nil {
			return "", nil, fmt.Errorf("plc: genesis: %w", err)
		}
		op.RotationKeys = []string{pub.DIDKey()}
	}
	apply(op, f)
	if err := op.Sign(signer); err != nil {
		return "", nil, fmt.Errorf("plc: genesis: %w", err)
	}
	did, err := op.DID()
	if err != nil {
		return "", nil, fmt.Errorf("plc: genesis: %w", err)
	}
	return syntax.DID(did), op, nil
}

// CreateUpdate builds and signs the operation that follows last (the DID's
// current operation, see Directory.Last): last's data with the non-zero
// fields of f applied. A new handle replaces the first at:// entry of
// alsoKnownAs, as the reference's client does.
func CreateUpdate(last didplc.Operation, signer atcrypto.PrivateKey, f Fields) (*didplc.RegularOp, error) {
	var base didplc.RegularOp
	switch o := last.(type) {
	case *didplc.RegularOp:
		base = *o
	case *didplc.LegacyOp:
		base = o.RegularOp()
	case *didplc.TombstoneOp:
		return nil, errors.New("plc: update: the DID is tombstoned")
	default:
		return nil, fmt.Errorf("plc: update: unknown operation type %T", last)
	}
	prev := last.CID().String()
	// Copies, so the update never aliases last's slices and maps.
	op := &didplc.RegularOp{
		Type:                "plc_operation",
		RotationKeys:        append([]string{}, base.RotationKeys...),
		VerificationMethods: maps.Clone(base.VerificationMethods),
		AlsoKnownAs:         append([]string{}, base.AlsoKnownAs...),
		Services:            maps.Clone(base.Services),
		Prev:                &prev,
	}
	if op.VerificationMethods == nil {
		op.VerificationMethods = map[string]string{}
	}
	if op.Services == nil {
		op.Services = map[string]didplc.OpService{}
	}
	if f.RotationKeys != nil {
		op.RotationKeys = slices.Clone(f.RotationKeys)
	}
	apply(op, f)
	if err := op.Sign(signer); err != nil {
		return nil, fmt.Errorf("plc: update: %w", err)
	}
	return op, nil
}

// CreateTombstone builds and signs the operation that deactivates the DID
// for good (until a rotation key nullifies it within 72 hours).
func CreateTombstone(last didplc.Operation, signer atcrypto.PrivateKey) (*didplc.TombstoneOp, error) {
	op := &didplc.TombstoneOp{Type: "plc_tombstone", Prev: last.CID().String()}
	if err := op.Sign(signer); err != nil {
		return nil, fmt.Errorf("plc: tombstone: %w", err)
	}
	return op, nil
}

func apply(op *didplc.RegularOp, f Fields) {
	if f.SigningKey != "" {
		op.VerificationMethods["atproto"] = f.SigningKey
	}
	if f.Handle != "" {
		aka := "at://" + f.Handle.String()
		if i := slices.IndexFunc(op.AlsoKnownAs, func(s string) bool { return strings.HasPrefix(s, "at://") }); i >= 0 {
			op.AlsoKnownAs[i] = aka
		} else {
			op.AlsoKnownAs = slices.Insert(op.AlsoKnownAs, 0, aka)
		}
	}
	if f.PDS != "" {
		endpoint := f.PDS
		if !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
			endpoint = "https://" + endpoint
		}
		op.Services["atproto_pds"] = didplc.OpService{Type: "AtprotoPersonalDataServer", Endpoint: endpoint}
	}
}
