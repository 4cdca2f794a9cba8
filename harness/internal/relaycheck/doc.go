// Package relaycheck holds only a test: that indigo's relay accepts the
// PDS endpoint a fakepds account's DID document publishes. It is a package
// of its own because the relay's code (gorm, its host checker) is heavy:
// no user of the harness imports this, so none of it reaches their builds.
package relaycheck
