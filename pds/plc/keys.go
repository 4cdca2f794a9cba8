package plc

import (
	"sync"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
)

// publicKeys holds parsed rotation keys by their did:key. Parsing one
// decompresses a curve point, ~25 µs, and a submitted operation's rotation
// keys were parsed twice (the format check, then the signature's
// verification); a PDS's accounts all name its own rotation key.
var publicKeys struct {
	sync.Mutex
	m map[string]atcrypto.PublicKey
}

// maxPublicKeys bounds publicKeys; past it, the cache starts over.
const maxPublicKeys = 1024

// parsePublicKey is atcrypto.ParsePublicDIDKey, remembered; a key that does
// not parse is not.
func parsePublicKey(didKey string) (atcrypto.PublicKey, error) {
	publicKeys.Lock()
	k, ok := publicKeys.m[didKey]
	publicKeys.Unlock()
	if ok {
		return k, nil
	}
	k, err := atcrypto.ParsePublicDIDKey(didKey)
	if err != nil {
		return nil, err
	}
	publicKeys.Lock()
	if publicKeys.m == nil || len(publicKeys.m) >= maxPublicKeys {
		publicKeys.m = make(map[string]atcrypto.PublicKey)
	}
	publicKeys.m[didKey] = k
	publicKeys.Unlock()
	return k, nil
}

// verifyAny is didplc.VerifySignatureAny with the keys parsed through
// parsePublicKey: the index of the first of keys that signed op.
func verifyAny(op interface {
	VerifySignature(atcrypto.PublicKey) error
}, keys []string) (int, error) {
	if len(keys) == 0 {
		return -1, atcrypto.ErrInvalidSignature
	}
	for i, dk := range keys {
		pub, err := parsePublicKey(dk)
		if err != nil {
			return -1, err
		}
		err = op.VerifySignature(pub)
		if err == nil {
			return i, nil
		}
		if err != atcrypto.ErrInvalidSignature {
			return -1, err
		}
	}
	return -1, atcrypto.ErrInvalidSignature
}
