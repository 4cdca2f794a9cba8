package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// Jetstream's limits on a subscriber's options.
const (
	MaxWantedCollections = 100
	MaxWantedDIDs        = 10_000
	// MaxMessageBytes bounds a message from the subscriber (10 MB, decimal,
	// as Jetstream documents it).
	MaxMessageBytes = 10_000_000
)

// ErrInvalidOptions is wrapped by every refusal of a subscriber's options.
var ErrInvalidOptions = errors.New("invalid subscriber options")

// filter is what a subscriber asked for. Nil sets match everything.
type filter struct {
	kinds       map[string]bool // v2's kinds; v1 has none
	dids        map[string]struct{}
	collections map[string]struct{}
	prefixes    []string // each ends in "."
	maxSize     int      // 0: no limit
}

// newFilter checks a subscriber's options as Jetstream does: full
// collections must be NSIDs; "<anything>.*" is a prefix, taken as given
// (Jetstream does not check the part before ".*", so "app.bsky.*" works);
// DIDs must be DIDs; the limits count distinct values.
func newFilter(collections, dids []string, maxSize int) (*filter, error) {
	f := &filter{maxSize: max(maxSize, 0)}
	// A list far past the limit is refused before it is deduplicated.
	if len(collections) > MaxWantedCollections*100 {
		return nil, fmt.Errorf("%w: too many wanted collections: %d", ErrInvalidOptions, len(collections))
	}
	if len(dids) > MaxWantedDIDs*100 {
		return nil, fmt.Errorf("%w: too many wanted DIDs: %d", ErrInvalidOptions, len(dids))
	}
	if len(collections) > 0 {
		f.collections = map[string]struct{}{}
		seen := map[string]bool{}
		for _, c := range collections {
			if head, ok := strings.CutSuffix(c, "*"); ok && strings.HasSuffix(head, ".") {
				if !seen[head] {
					seen[head] = true
					f.prefixes = append(f.prefixes, head)
				}
			} else {
				nsid, err := syntax.ParseNSID(c)
				if err != nil {
					return nil, fmt.Errorf("%w: invalid collection: %s", ErrInvalidOptions, c)
				}
				f.collections[nsid.String()] = struct{}{}
			}
			if len(f.collections)+len(f.prefixes) > MaxWantedCollections {
				return nil, fmt.Errorf("%w: too many wanted collections: more than %d", ErrInvalidOptions, MaxWantedCollections)
			}
		}
	}
	if len(dids) > 0 {
		f.dids = make(map[string]struct{}, len(dids))
		for _, d := range dids {
			did, err := syntax.ParseDID(d)
			if err != nil {
				return nil, fmt.Errorf("%w: invalid DID: %s", ErrInvalidOptions, d)
			}
			f.dids[did.String()] = struct{}{}
		}
		if len(f.dids) > MaxWantedDIDs {
			return nil, fmt.Errorf("%w: too many wanted DIDs: %d > %d", ErrInvalidOptions, len(f.dids), MaxWantedDIDs)
		}
	}
	return f, nil
}

// wants: kinds (v2) and wantedDids apply to every kind, wantedCollections
// only to commits (identity, account and sync events reach every
// subscriber of their DID, as Jetstream's README promises).
func (f *filter) wants(e *Event) bool {
	if f.kinds != nil && !f.kinds[e.Kind] {
		return false
	}
	if f.dids != nil {
		if _, ok := f.dids[e.DID]; !ok {
			return false
		}
	}
	if f.collections == nil || e.Commit == nil {
		return true
	}
	if _, ok := f.collections[e.Commit.Collection]; ok {
		return true
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(e.Commit.Collection, p) {
			return true
		}
	}
	return false
}

// maxSizeParam reads maxMessageSizeBytes as Jetstream does: empty,
// malformed, negative or past uint32 is 0, no limit.
func maxSizeParam(s string) int {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<32-1 {
		return 0
	}
	return int(n)
}

// subscriberMessage is a message from the subscriber; options_update is
// the only type Jetstream acts on.
type subscriberMessage struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// OptionsUpdate is the payload of an options_update message: it replaces
// the subscriber's filters (an empty list matches everything).
type OptionsUpdate struct {
	WantedCollections   []string `json:"wantedCollections"`
	WantedDIDs          []string `json:"wantedDids"`
	MaxMessageSizeBytes int      `json:"maxMessageSizeBytes"`
}
