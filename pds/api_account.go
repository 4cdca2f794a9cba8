package pds

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/k256"
	"github.com/fakepds/fakepds/pds/plc"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

func (s *Server) registerAccount(x *xrpc.Mux) {
	handleInput(s, x, "com.atproto.server.createAccount", xrpc.JSONLimit, authn{kind: authMigration}, s.createAccount)
}

type createAccountInput struct {
	Handle      string          `json:"handle"`
	Email       string          `json:"email"`
	Password    string          `json:"password"`
	InviteCode  string          `json:"inviteCode"`
	DID         string          `json:"did"`
	RecoveryKey string          `json:"recoveryKey"`
	PlcOp       json.RawMessage `json:"plcOp"`
}

type createAccountOutput struct {
	Handle     string `json:"handle"`
	DID        string `json:"did"`
	DIDDoc     *any   `json:"didDoc,omitempty"`
	AccessJwt  string `json:"accessJwt"`
	RefreshJwt string `json:"refreshJwt"`
}

func (s *Server) createAccount(w http.ResponseWriter, r *http.Request, c *caller, in *createAccountInput) error {
	var requester string // a migration's service token names the account's DID
	if c != nil {
		requester = c.DID
	}
	out, err := s.makeAccount(r.Context(), requester, in)
	if err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

// makeAccount is createAccount's work, shared with the OAuth authorize
// page's sign-up.
func (s *Server) makeAccount(ctx context.Context, requester string, in *createAccountInput) (createAccountOutput, error) {
	// The checks, in the reference's order.
	if len(in.PlcOp) > 0 && string(in.PlcOp) != "null" {
		return createAccountOutput{}, xrpc.InvalidRequest("", `Unsupported input: "plcOp"`)
	}
	if len(in.Password) > auth.NewPasswordMaxLength {
		return createAccountOutput{}, xrpc.InvalidRequest("", "Password too long. Maximum length is %d characters.", auth.NewPasswordMaxLength)
	}
	if s.cfg.InviteRequired && in.InviteCode == "" {
		return createAccountOutput{}, xrpc.InvalidRequest("InvalidInviteCode", "No invite code provided")
	}
	if in.Email == "" {
		return createAccountOutput{}, xrpc.InvalidRequest("", "Email is required")
	}
	if !validEmail(in.Email) {
		return createAccountOutput{}, xrpc.InvalidRequest("", "This email address is not supported, please use a different email.")
	}
	handle, err := s.normalizeHandle(in.Handle, in.DID == "")
	if err != nil {
		return createAccountOutput{}, err
	}
	if !s.isServiceHandle(handle.String()) {
		// A custom domain with a DID: fakepds cannot resolve it (no DNS).
		return createAccountOutput{}, xrpc.InvalidRequest("", "External handle did not resolve to DID")
	}
	if s.cfg.InviteRequired {
		if err := s.accounts.InviteAvailable(ctx, in.InviteCode); err != nil {
			return createAccountOutput{}, inviteError(err)
		}
	}
	if acc, err := s.accounts.ByHandle(ctx, handle.String()); err == nil && acc.Active() {
		return createAccountOutput{}, xrpc.InvalidRequest("", "Handle already taken: %s", handle)
	} else if err != nil && !errors.Is(err, account.ErrNotFound) {
		return createAccountOutput{}, err
	}
	if acc, err := s.accounts.ByEmail(ctx, in.Email); err == nil && acc.Active() {
		return createAccountOutput{}, xrpc.InvalidRequest("", "Email already taken: %s", in.Email)
	} else if err != nil && !errors.Is(err, account.ErrNotFound) {
		return createAccountOutput{}, err
	}

	key, err := k256.Generate(s.rand("signing-keys"))
	if err != nil {
		return createAccountOutput{}, err
	}
	pub, err := key.PublicKey()
	if err != nil {
		return createAccountOutput{}, err
	}
	var did syntax.DID
	var genesis *didplc.RegularOp
	deactivated := false
	if in.DID != "" {
		// Bringing a DID (migration): only its owner may, and the account
		// starts deactivated until the migration completes.
		if requester != in.DID {
			return createAccountOutput{}, xrpc.AuthRequired("", "Missing auth to create account with did: %s", in.DID)
		}
		did, deactivated = syntax.DID(in.DID), true
	} else {
		rotation := []string{}
		if in.RecoveryKey != "" {
			rotation = append(rotation, in.RecoveryKey)
		}
		if s.cfg.RecoveryDIDKey != "" {
			rotation = append(rotation, s.cfg.RecoveryDIDKey)
		}
		srvPub, _ := s.plcKey.PublicKey()
		rotation = append(rotation, srvPub.DIDKey())
		d, op, err := plc.CreateGenesis(s.pooled(s.plcKey), plc.Fields{RotationKeys: rotation, SigningKey: pub.DIDKey(), Handle: handle, PDS: s.publicURL()})
		if err != nil {
			return createAccountOutput{}, xrpc.InvalidRequest("", "Unable to create PLC operation: %v", err)
		}
		did, genesis = d, op
	}

	commit, err := s.createRepo(ctx, did, s.pooled(key))
	if err != nil {
		return createAccountOutput{}, err
	}
	undo := []func(){func() { s.destroyActorStore(did.String()) }}
	fail := func(err error) error {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return err
	}
	if genesis != nil {
		if err := s.plc.Submit(ctx, did, genesis); err != nil {
			return createAccountOutput{}, fail(plcError(err))
		}
		undo = append(undo, func() { s.tombstone(context.WithoutCancel(ctx), did) })
	}
	didDoc := s.didDoc(ctx, did.String())

	var hash string
	if in.Password != "" {
		if hash, err = s.hasher.Hash(in.Password); err != nil {
			return createAccountOutput{}, fail(err)
		}
	}
	now := s.clock.Now()
	err = s.accounts.Create(ctx, account.NewAccount{
		DID: did.String(), Handle: handle.String(), Email: strings.ToLower(in.Email), PasswordScrypt: hash,
		SigningKey: key.Bytes(), InviteCode: in.InviteCode, Deactivated: deactivated, Now: now,
	})
	if errors.Is(err, account.ErrInviteUnavailable) {
		return createAccountOutput{}, fail(inviteError(err))
	}
	if err != nil {
		// A handle or email held by a taken-down or deactivated account
		// fails here, after the checks above: a 500, as in the reference.
		return createAccountOutput{}, fail(err)
	}
	undo = append(undo, func() { s.accounts.Delete(context.WithoutCancel(ctx), did.String()) })
	// The account's first write would read the key back and parse it
	// again (two public key derivations).
	s.keys.put(did.String(), key)
	undo = append(undo, func() { s.forgetKey(did.String()) })
	sess, err := s.newSession(ctx, did.String(), nil, false)
	if err != nil {
		return createAccountOutput{}, fail(err)
	}
	if !deactivated {
		if _, err := s.seq.Append(ctx, now,
			sequencer.Identity(did.String(), handle.String()),
			sequencer.Account(did.String(), ""),
			sequencer.Commit(commit.CommitEvent()),
			sequencer.Sync(commit.SyncEvent()),
		); err != nil {
			return createAccountOutput{}, fail(err)
		}
	}
	// The statements of the account's first write, once the answer is out.
	s.idleOn(did.String(), func(a *actor) { a.prepareWriter(context.Background()) })
	s.noteWrite()
	return createAccountOutput{
		Handle: handle.String(), DID: did.String(), DIDDoc: didDoc, AccessJwt: sess.access, RefreshJwt: sess.refresh,
	}, nil
}

func inviteError(err error) error {
	if errors.Is(err, account.ErrInviteUnavailable) {
		return xrpc.InvalidRequest("InvalidInviteCode", "Provided invite code not available")
	}
	return err
}

// plcError maps a refused PLC operation as the reference's PLC client does:
// the directory's 5xx is an upstream failure, anything else bad input.
func plcError(err error) error {
	var oe *plc.OpError
	if errors.As(err, &oe) {
		if oe.Status >= 500 {
			return xrpc.Errorf(http.StatusBadGateway, "UpstreamFailure", "%s", oe.Message)
		}
		return xrpc.InvalidRequest("", "%s", oe.Message)
	}
	return err
}

// createRepo makes did's actor store and its empty, signed repo.
func (s *Server) createRepo(ctx context.Context, did syntax.DID, key atcrypto.PrivateKey) (*repo.Commit, error) {
	h, err := s.acquire(ctx, did.String())
	if err != nil {
		return nil, err
	}
	defer h.Release()
	var c *repo.Commit
	err = h.DB.DB.Write(ctx, func(tx *sql.Tx) error {
		c, err = repo.Create(ctx, h.DB.InTx(tx), did, key, s.clock.Now())
		return err
	})
	if err != nil {
		s.destroyActorStore(did.String())
		return nil, err
	}
	// The spare's statements (warmSpare) have done their one run: kept,
	// they would hold 3 of the store's query slots for good.
	h.DB.DropQueries(repo.CreateQueries()...)
	return c, nil
}

// warmSpare readies the next new account's actor store in the background
// (actorstore.Spare): its empty repo's statements prepared (the first
// parses the schema) and the first of them run in a write transaction,
// which reads the file's first pages and takes its lock. createRepo did
// all that on the new account's cold connection: its check for a repo was
// ~160 µs of a ~230 µs repo.Create, its BEGIN ~57 µs.
func warmSpare(ctx context.Context, db *store.DB) error {
	if err := db.PrepareQueries(ctx, repo.CreateQueries()...); err != nil {
		return err
	}
	return db.Write(ctx, func(tx *sql.Tx) error {
		_, err := repo.Exists(ctx, db.InTx(tx))
		return err
	})
}

// evictWait bounds how long destroyActorStore waits for a store in use.
const evictWait = 2 * time.Second

// destroyActorStore closes and removes did's actor store files and blobs.
func (s *Server) destroyActorStore(did string) {
	// A store still in use (a request of the account's finishing, work
	// left by its last write running) would stay open in the cache on
	// files removed below, and be what a new account with the same DID
	// (a migration back) got. Its users hold it for a moment only.
	for deadline := time.Now().Add(evictWait); !s.actors.Evict(did); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			s.log.Warn("removing an actor store still in use", "did", did)
			break
		}
	}
	if err := s.blobs().RemoveAccount(did); err != nil {
		s.log.Warn("remove blobs", "did", did, "err", err)
	}
	p := actorstore.Path(s.actorDir(), did)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(p + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("remove actor store", "did", did, "err", err)
		}
	}
}

// tombstone ends did in the PLC directory (undoing a failed creation).
func (s *Server) tombstone(ctx context.Context, did syntax.DID) {
	last, err := s.plc.Last(ctx, did)
	if err == nil {
		var op *didplc.TombstoneOp
		if op, err = plc.CreateTombstone(last, s.plcKey); err == nil {
			err = s.plc.Submit(ctx, did, op)
		}
	}
	if err != nil {
		s.log.Warn("tombstone after failed account creation", "did", did, "err", err)
	}
}

// optionalServiceAuth checks the service auth token createAccount may
// carry (a migration to this PDS). No header: "". Returns the issuer.
func (s *Server) optionalServiceAuth(r *http.Request, lxm string) (string, error) {
	scheme, token, err := authHeader(r)
	if err != nil {
		return "", err
	}
	switch scheme {
	case "":
		return "", nil
	case "BEARER":
	default:
		return "", xrpc.AuthRequired("", "Invalid authorization header")
	}
	return s.userServiceAuth(r.Context(), token, lxm)
}
