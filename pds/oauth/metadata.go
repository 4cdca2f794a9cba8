package oauth

import (
	"net/http"
	"slices"
)

// protectedResource is RFC 9728's document for the PDS, with the
// reference PDS's values: the PDS is its own authorization server.
func (p *Provider) protectedResource(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Method", "*")
	h.Set("Access-Control-Allow-Headers", "*")
	h.Set("Content-Type", "application/json; charset=utf-8") // express's res.json, as the reference
	iss := p.issuer()
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 iss,
		"authorization_servers":    []string{iss},
		"scopes_supported":         []string{},
		"bearer_methods_supported": []string{"header"},
		"resource_documentation":   "https://atproto.com",
	})
}

// serverMetadata is RFC 8414's document, field for field (and in the
// order of) the reference's buildMetadata.
func (p *Provider) serverMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	iss := p.issuer()
	algs := algNames()
	writeJSON(w, http.StatusOK, serverMetadata{
		Issuer:                    iss,
		RequestParameterSupported: true, RequestURIParameterSupported: true, RequireRequestURIRegistration: true,
		ScopesSupported:             []string{"atproto", "transition:email", "transition:generic", "transition:chat.bsky"},
		SubjectTypesSupported:       []string{"public"},
		ResponseTypesSupported:      []string{"code"},
		ResponseModesSupported:      []string{"query", "fragment", "form_post"},
		GrantTypesSupported:         []string{"authorization_code", "refresh_token"},
		CodeChallengeMethods:        []string{"S256"},
		UILocalesSupported:          []string{"en-US"},
		DisplayValuesSupported:      []string{"page", "popup", "touch"},
		RequestObjectSigningAlgs:    append(slices.Clone(algs), "none"),
		ISSParameterSupported:       true,
		RequestObjectEncryptionAlgs: []string{},
		RequestObjectEncryptionEncs: []string{},
		JWKSURI:                     iss + "/oauth/jwks",
		AuthorizationEndpoint:       iss + "/oauth/authorize",
		TokenEndpoint:               iss + "/oauth/token",
		TokenEndpointAuthMethods:    []string{"none", "private_key_jwt"},
		TokenEndpointAuthAlgs:       algs,
		RevocationEndpoint:          iss + "/oauth/revoke",
		PAREndpoint:                 iss + "/oauth/par",
		RequirePAR:                  true,
		DPoPAlgs:                    algs,
		ProtectedResources:          []string{iss},
		ClientIDMetadataDocument:    true,
		PromptValuesSupported:       []string{"none", "login", "consent", "select_account", "create"},
	})
}

type serverMetadata struct {
	Issuer                        string   `json:"issuer"`
	RequestParameterSupported     bool     `json:"request_parameter_supported"`
	RequestURIParameterSupported  bool     `json:"request_uri_parameter_supported"`
	RequireRequestURIRegistration bool     `json:"require_request_uri_registration"`
	ScopesSupported               []string `json:"scopes_supported"`
	SubjectTypesSupported         []string `json:"subject_types_supported"`
	ResponseTypesSupported        []string `json:"response_types_supported"`
	ResponseModesSupported        []string `json:"response_modes_supported"`
	GrantTypesSupported           []string `json:"grant_types_supported"`
	CodeChallengeMethods          []string `json:"code_challenge_methods_supported"`
	UILocalesSupported            []string `json:"ui_locales_supported"`
	DisplayValuesSupported        []string `json:"display_values_supported"`
	RequestObjectSigningAlgs      []string `json:"request_object_signing_alg_values_supported"`
	ISSParameterSupported         bool     `json:"authorization_response_iss_parameter_supported"`
	RequestObjectEncryptionAlgs   []string `json:"request_object_encryption_alg_values_supported"`
	RequestObjectEncryptionEncs   []string `json:"request_object_encryption_enc_values_supported"`
	JWKSURI                       string   `json:"jwks_uri"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	TokenEndpointAuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
	TokenEndpointAuthAlgs         []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	RevocationEndpoint            string   `json:"revocation_endpoint"`
	PAREndpoint                   string   `json:"pushed_authorization_request_endpoint"`
	RequirePAR                    bool     `json:"require_pushed_authorization_requests"`
	DPoPAlgs                      []string `json:"dpop_signing_alg_values_supported"`
	ProtectedResources            []string `json:"protected_resources"`
	ClientIDMetadataDocument      bool     `json:"client_id_metadata_document_supported"`
	PromptValuesSupported         []string `json:"prompt_values_supported"`
}

// jwks is empty: access tokens are signed with a symmetric key, as the
// reference PDS signs them, so there is no public key to publish.
func (p *Provider) jwks(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, map[string]any{"keys": []any{}})
}
