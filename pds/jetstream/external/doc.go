// Package external checks fakepds's Jetstream against Jetstream's own
// code: today's Go client (the module root of bluesky-social/jetstream,
// which speaks only the v2 stream) consuming a fakepds, and the Jetstream
// program itself, pointed at fakepds's firehose, giving the same events as
// fakepds's own streams (TestJetstreamProgram; scripts/jetstream-diff.sh).
//
// It is a module of its own: Jetstream's current module has no pkg/models
// or pkg/client, which fakepds's main module takes from the legacy
// version, and a module holds one version of another. So it runs fakepds
// as its users do, the fakepds binary built from this repository, and
// talks to it over HTTP only.
package external
