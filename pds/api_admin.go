package pds

import "github.com/fakepds/fakepds/pds/xrpc"

// registerAdmin adds the com.atproto.admin.* methods.
func (s *Server) registerAdmin(x *xrpc.Mux) {
}
