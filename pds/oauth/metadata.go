package oauth

import "net/http"

// protectedResource is RFC 9728's document for the PDS, with the
// reference PDS's values: the PDS is its own authorization server.
func (p *Provider) protectedResource(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Method", "*")
	h.Set("Access-Control-Allow-Headers", "*")
	iss := p.issuer()
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 iss,
		"authorization_servers":    []string{iss},
		"scopes_supported":         []string{},
		"bearer_methods_supported": []string{"header"},
		"resource_documentation":   "https://atproto.com",
	})
}

// serverMetadata is RFC 8414's document, field for field the reference's
// buildMetadata, except that the signing algorithms are those fakepds
// verifies (no ES256K) and the request-object and form_post options it does
// not implement are left out.
func (p *Provider) serverMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	iss := p.issuer()
	algs := algNames()
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer": iss,
		"scopes_supported": []string{
			"atproto", "transition:email", "transition:generic", "transition:chat.bsky",
		},
		"subject_types_supported":                          []string{"public"},
		"response_types_supported":                         []string{"code"},
		"response_modes_supported":                         []string{"query", "fragment", "form_post"},
		"grant_types_supported":                            []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":                 []string{"S256"},
		"ui_locales_supported":                             []string{"en-US"},
		"display_values_supported":                         []string{"page", "popup", "touch"},
		"prompt_values_supported":                          []string{"none", "login", "consent", "select_account"},
		"authorization_response_iss_parameter_supported":   true,
		"request_object_signing_alg_values_supported":      []string{},
		"request_object_encryption_alg_values_supported":   []string{},
		"request_object_encryption_enc_values_supported":   []string{},
		"request_parameter_supported":                      false,
		"request_uri_parameter_supported":                  true,
		"require_request_uri_registration":                 true,
		"jwks_uri":                                         iss + "/oauth/jwks",
		"authorization_endpoint":                           iss + "/oauth/authorize",
		"token_endpoint":                                   iss + "/oauth/token",
		"token_endpoint_auth_methods_supported":            []string{"none", "private_key_jwt"},
		"token_endpoint_auth_signing_alg_values_supported": algs,
		"revocation_endpoint":                              iss + "/oauth/revoke",
		"pushed_authorization_request_endpoint":            iss + "/oauth/par",
		"require_pushed_authorization_requests":            true,
		"dpop_signing_alg_values_supported":                algs,
		"protected_resources":                              []string{iss},
		"client_id_metadata_document_supported":            true,
	})
}

// jwks is empty: access tokens are signed with a symmetric key, as the
// reference PDS signs them, so there is no public key to publish.
func (p *Provider) jwks(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, map[string]any{"keys": []any{}})
}
