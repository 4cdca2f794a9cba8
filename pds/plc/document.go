package plc

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
)

// Data is a DID's current state, as GET /{did}/data serves it.
type Data struct {
	DID                 syntax.DID                  `json:"did"`
	VerificationMethods map[string]string           `json:"verificationMethods"`
	RotationKeys        []string                    `json:"rotationKeys"`
	AlsoKnownAs         []string                    `json:"alsoKnownAs"`
	Services            map[string]didplc.OpService `json:"services"`
}

// Document is a DID document as the public directory serves it: go-didplc's
// didplc.Doc with the JSON-LD context in front.
type Document struct {
	Context []string `json:"@context"`
	didplc.Doc
}

// JSON-LD contexts of a document: the first two always, then one per key
// type among the verification methods.
const (
	contextDID       = "https://www.w3.org/ns/did/v1"
	contextMultikey  = "https://w3id.org/security/multikey/v1"
	contextP256      = "https://w3id.org/security/suites/ecdsa-2019/v1"
	contextSecp256k1 = "https://w3id.org/security/suites/secp256k1-2019/v1"
)

// Document formats the data as the public directory does. go-didplc's
// RegularOp.Doc is close but not the same document: it has no @context,
// names services "did:plc:…#id" where the directory writes "#id", orders
// entries at random (map iteration), and fails on a verification key of a
// type it cannot parse, which the directory accepts and publishes as is.
func (data *Data) Document() *Document {
	did := string(data.DID)
	doc := &Document{
		Context: []string{contextDID, contextMultikey},
		Doc: didplc.Doc{
			ID:                 did,
			AlsoKnownAs:        data.AlsoKnownAs,
			VerificationMethod: make([]didplc.DocVerificationMethod, 0, len(data.VerificationMethods)),
			Service:            make([]didplc.DocService, 0, len(data.Services)),
		},
	}
	for _, id := range jsonbOrder(data.VerificationMethods) {
		key := data.VerificationMethods[id]
		if c := keyContext(key); c != "" && !slices.Contains(doc.Context, c) {
			doc.Context = append(doc.Context, c)
		}
		doc.VerificationMethod = append(doc.VerificationMethod, didplc.DocVerificationMethod{
			ID:                 did + "#" + id,
			Type:               "Multikey",
			Controller:         did,
			PublicKeyMultibase: strings.TrimPrefix(key, "did:key:"),
		})
	}
	for _, id := range jsonbOrder(data.Services) {
		s := data.Services[id]
		doc.Service = append(doc.Service, didplc.DocService{ID: "#" + id, Type: s.Type, ServiceEndpoint: s.Endpoint})
	}
	return doc
}

// keyContexts caches keyContext: parsing a compressed key decompresses
// the point, which was a quarter of Resolve's time. Bounded: past
// maxKeyContexts entries, new keys are parsed every time.
var (
	keyContexts    sync.Map // did:key -> context ("" for none)
	keyContextsLen atomic.Int64
)

const maxKeyContexts = 1 << 14

// keyContext is the JSON-LD context a verification key adds to a document:
// by key type, none for a key that does not parse (the reference's
// formatKeyAndContext).
func keyContext(didKey string) string {
	if c, ok := keyContexts.Load(didKey); ok {
		return c.(string)
	}
	var c string
	if pub, err := atcrypto.ParsePublicDIDKey(didKey); err == nil {
		switch pub.(type) {
		case *atcrypto.PublicKeyP256:
			c = contextP256
		case *atcrypto.PublicKeyK256:
			c = contextSecp256k1
		}
	}
	if keyContextsLen.Load() < maxKeyContexts {
		if _, loaded := keyContexts.LoadOrStore(didKey, c); !loaded {
			keyContextsLen.Add(1)
		}
	}
	return c
}

// Identity is the document as indigo's identity package reads it (keys,
// services, declared handle). Its Handle is handle.invalid: nothing here
// verifies the handle.
func (doc *Document) Identity() identity.Identity {
	d := identity.DIDDocument{
		DID:                syntax.DID(doc.ID),
		AlsoKnownAs:        doc.AlsoKnownAs,
		VerificationMethod: make([]identity.DocVerificationMethod, len(doc.VerificationMethod)),
		Service:            make([]identity.DocService, len(doc.Service)),
	}
	for i, vm := range doc.VerificationMethod {
		d.VerificationMethod[i] = identity.DocVerificationMethod(vm)
	}
	for i, s := range doc.Service {
		d.Service[i] = identity.DocService(s)
	}
	return identity.ParseIdentity(&d)
}

// dataOf is the data an operation leaves a DID with; ErrTombstoned for a
// tombstone.
func dataOf(did syntax.DID, op didplc.Operation) (*Data, error) {
	var r didplc.RegularOp
	switch o := op.(type) {
	case *didplc.RegularOp:
		r = *o
	case *didplc.LegacyOp:
		r = o.RegularOp()
	case *didplc.TombstoneOp:
		return nil, ErrTombstoned
	default:
		return nil, fmt.Errorf("plc: unknown operation type %T", op)
	}
	return &Data{
		DID:                 did,
		VerificationMethods: r.VerificationMethods,
		RotationKeys:        r.RotationKeys,
		AlsoKnownAs:         r.AlsoKnownAs,
		Services:            r.Services,
	}, nil
}

// jsonbOrder returns m's keys in the order the public directory's Postgres
// jsonb column gives them back (shorter first, then bytewise), which is the
// order its documents list verification methods and services in. It is
// also DAG-CBOR's canonical key order.
func jsonbOrder[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
	})
}
