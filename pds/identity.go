package pds

import "context"

// didDocForSession is the account's DID document for session outputs, or
// nil when it cannot be resolved (the reference omits it then too).
func (s *Server) didDocForSession(ctx context.Context, did string) *any {
	return nil // TODO(plc): resolve through the PLC directory once pds/plc lands
}
