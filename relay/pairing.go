package relay

// Pairing: a machine asks for a one-time code; a phone (or a second
// machine) redeems it for a credential of its own.
//
// The exchange is made to carry, later, what end-to-end encryption needs:
// the machine's X25519 public key goes with the code request
// (machineKey) and back to the redeemer; the redeemer's key goes with the
// redemption (publicKey) and is stored with its credential; confirm is the
// redeemer's HMAC over both keys, keyed by the code, which the relay only
// passes on. The link's fragment (#pair=CODE.FINGERPRINT) carries the
// machine key's fingerprint, which the relay never sees.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Limits of pairing (docs/protocol.md, "Limits: accounts and pairing").
const (
	// PairCodeTTL: a pairing code works once, within this time.
	PairCodeTTL = 5 * time.Minute
	// PairCodeLen is a code's length in characters of pairAlphabet (5 bits
	// each: 50 bits).
	PairCodeLen = 10
	// PairGuessLimit wrong codes, from all addresses together, within
	// PairCodeTTL void every code outstanding: guessing one among them
	// stays hopeless however many addresses guess.
	PairGuessLimit = 20
	// MaxPendingCodes bounds the codes outstanding at once (the oldest
	// goes first).
	MaxPendingCodes = 16
	// maxPairBody bounds a pairing request's body.
	maxPairBody = 8 << 10
	// maxPublicKey bounds a public key sent with a pairing (an X25519 key
	// is 32 bytes; room for another kind).
	maxPublicKey = 256
	// spentMemory: a used or expired code is remembered this long, to say
	// so instead of "unknown".
	spentMemory = time.Hour
)

// pairAlphabet is Crockford's base 32: no I, L, O or U to misread.
const pairAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// PairResult is what became of a code, for the machine that asked for it:
// the credential made, and the redeemer's public key and confirmation tag,
// which the machine checks with the link's secret before it trusts the
// device (docs/security.md, "Pairing: trusting a device").
type PairResult struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	PublicKey []byte `json:"publicKey,omitempty"`
	Confirm   []byte `json:"confirm,omitempty"`
	// Accepted is the device's acceptance tag (seal.RoleDeviceAccepted),
	// sent once it checked the machine key the relay passed on; Refused is
	// why it refused that key (its credential is then revoked). The relay
	// only passes them on: the machine checks the tag with the link's
	// secret, which the relay never sees.
	Accepted []byte `json:"accepted,omitempty"`
	Refused  string `json:"refused,omitempty"`
}

// maxRefusal bounds the reason a device gives for refusing a pairing.
const maxRefusal = 512

// setAnswer records the redeemer's acceptance or refusal of a pairing in
// its result, once: only the credential the code made may answer.
func (p *pairing) setAnswer(ctx context.Context, code, cred string, accepted []byte, refused string) error {
	k := codeKey(code)
	t, err := p.store.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer t.Rollback()
	var result string
	err = t.QueryRowContext(ctx, `SELECT result FROM pairing_codes WHERE key = ?`, k[:]).Scan(&result)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && result == "") {
		return errPair{"no such pairing of this device"}
	}
	if err != nil {
		return err
	}
	var r PairResult
	if err := json.Unmarshal([]byte(result), &r); err != nil {
		return err
	}
	if r.ID != cred {
		return errPair{"no such pairing of this device"}
	}
	if r.Accepted != nil || r.Refused != "" {
		return errPair{"this pairing was already answered"}
	}
	r.Accepted, r.Refused = accepted, refused
	b, _ := json.Marshal(r)
	if _, err := t.ExecContext(ctx, `UPDATE pairing_codes SET result = ? WHERE key = ?`, string(b), k[:]); err != nil {
		return err
	}
	return t.Commit()
}

// A code's spent column: 0 while it may be redeemed, spentCancelled when
// it was voided (too many wrong guesses, too many codes outstanding, or a
// redemption that failed), spentRedeemed once redeemed (its result follows
// at once: until then the machine is told to ask again).
const (
	spentCancelled = 1
	spentRedeemed  = 2
)

// cancel voids a code redeemed whose redemption then failed, so that the
// machine waiting for it hears so at once.
func (p *pairing) cancel(ctx context.Context, code string) error {
	k := codeKey(code)
	_, err := p.store.w.ExecContext(ctx, `UPDATE pairing_codes SET spent = ? WHERE key = ? AND result = ''`, spentCancelled, k[:])
	return err
}

// setResult records what a redeemed code made.
func (p *pairing) setResult(ctx context.Context, code string, r PairResult) error {
	b, _ := json.Marshal(r)
	k := codeKey(code)
	_, err := p.store.w.ExecContext(ctx, `UPDATE pairing_codes SET result = ? WHERE key = ?`, string(b), k[:])
	return err
}

// resultOf is what became of code for the credential by that asked for
// it: the result once redeemed; ok false while it is not; an errPair when
// the code is unknown, another's, or spent without a result.
func (p *pairing) resultOf(ctx context.Context, code, by string) (res PairResult, ok bool, err error) {
	k := codeKey(code)
	var byCred, result string
	var expires int64
	var spent int
	err = p.store.r.QueryRowContext(ctx, `SELECT by_cred, expires_ms, spent, result FROM pairing_codes WHERE key = ?`, k[:]).Scan(&byCred, &expires, &spent, &result)
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && byCred != by):
		return res, false, errPair{"no such pairing code of this machine"}
	case err != nil:
		return res, false, err
	case result != "":
		if err := json.Unmarshal([]byte(result), &res); err != nil {
			return res, false, err
		}
		return res, true, nil
	case spent == spentCancelled:
		return res, false, errPair{"this pairing code was cancelled"}
	case !p.now().Before(time.UnixMilli(expires)):
		return res, false, errPair{"this pairing code expired"}
	}
	return res, false, nil
}

// pairing keeps the codes outstanding, and the wrong guesses, in the store:
// a code asked for through one relay can be redeemed through another that
// shares its database. A code is kept as its SHA-256 only.
type pairing struct {
	now   func() time.Time
	store *Store
}

func newPairing(store *Store, now func() time.Time) *pairing {
	return &pairing{now: now, store: store}
}

// NormalizeCode is a code as typed: upper case, without spaces or dashes,
// with the letters people confuse with digits read as the digits.
func NormalizeCode(code string) string {
	code = strings.ToUpper(code)
	code = strings.NewReplacer(" ", "", "-", "", "O", "0", "I", "1", "L", "1").Replace(code)
	return code
}

func codeKey(code string) [32]byte {
	return sha256.Sum256([]byte("ccrelay-pair:" + NormalizeCode(code)))
}

// sweep forgets codes spent or expired longer than spentMemory ago, and
// wrong guesses older than PairCodeTTL.
func (p *pairing) sweep(ctx context.Context, t sqlTx, now time.Time) error {
	if _, err := t.ExecContext(ctx, `DELETE FROM pairing_codes WHERE expires_ms < ?`, now.Add(-spentMemory).UnixMilli()); err != nil {
		return err
	}
	_, err := t.ExecContext(ctx, `DELETE FROM pair_guesses WHERE at_ms < ?`, now.Add(-PairCodeTTL).UnixMilli())
	return err
}

// issue makes a code for account and role.
func (p *pairing) issue(ctx context.Context, account, role, by string, machineKey []byte) (string, time.Time, error) {
	var b [PairCodeLen]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = pairAlphabet[int(b[i])%len(pairAlphabet)]
	}
	code := string(b[:])
	now := p.now()
	t, err := p.store.w.BeginTx(ctx, nil)
	if err != nil {
		return "", time.Time{}, err
	}
	defer t.Rollback()
	if err := p.sweep(ctx, t, now); err != nil {
		return "", time.Time{}, err
	}
	// At most MaxPendingCodes outstanding: the oldest goes first.
	var pending int
	if err := t.QueryRowContext(ctx, `SELECT COUNT(*) FROM pairing_codes WHERE spent = 0 AND expires_ms > ?`, now.UnixMilli()).Scan(&pending); err != nil {
		return "", time.Time{}, err
	}
	if over := pending - MaxPendingCodes + 1; over > 0 {
		if _, err := t.ExecContext(ctx, `UPDATE pairing_codes SET spent = 1 WHERE key IN
			(SELECT key FROM pairing_codes WHERE spent = 0 AND expires_ms > ? ORDER BY expires_ms LIMIT ?)`, now.UnixMilli(), over); err != nil {
			return "", time.Time{}, err
		}
	}
	exp := now.Add(PairCodeTTL)
	k := codeKey(code)
	if _, err := t.ExecContext(ctx, `INSERT INTO pairing_codes (key, account, role, machine_key, by_cred, expires_ms) VALUES (?, ?, ?, ?, ?, ?)`,
		k[:], account, role, machineKey, by, exp.UnixMilli()); err != nil {
		return "", time.Time{}, err
	}
	return code, exp, t.Commit()
}

// errPair is a refused code, said plainly to whoever offered it.
type errPair struct{ msg string }

func (e errPair) Error() string { return e.msg }

// pairCode is an outstanding code as redeem finds it.
type pairCode struct {
	account    string
	role       string
	machineKey []byte
}

// redeem spends code, or says why it cannot. Wrong codes are counted over
// every relay sharing the store.
func (p *pairing) redeem(ctx context.Context, code string) (pairCode, error) {
	if len(NormalizeCode(code)) != PairCodeLen {
		return pairCode{}, errPair{fmt.Sprintf("a pairing code has %d letters and digits; check it, or run ccrelay pair for a new one", PairCodeLen)}
	}
	now := p.now()
	t, err := p.store.w.BeginTx(ctx, nil)
	if err != nil {
		return pairCode{}, err
	}
	defer t.Rollback()
	if err := p.sweep(ctx, t, now); err != nil {
		return pairCode{}, err
	}
	k := codeKey(code)
	var c pairCode
	var expires int64
	var spent int
	err = t.QueryRowContext(ctx, `SELECT account, role, machine_key, expires_ms, spent FROM pairing_codes WHERE key = ?`, k[:]).Scan(&c.account, &c.role, &c.machineKey, &expires, &spent)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := t.ExecContext(ctx, `INSERT INTO pair_guesses (at_ms) VALUES (?)`, now.UnixMilli()); err != nil {
			return pairCode{}, err
		}
		var guesses int
		if err := t.QueryRowContext(ctx, `SELECT COUNT(*) FROM pair_guesses`).Scan(&guesses); err != nil {
			return pairCode{}, err
		}
		msg := "wrong pairing code: check it, or run ccrelay pair for a new one"
		if guesses >= PairGuessLimit {
			for _, q := range []string{`UPDATE pairing_codes SET spent = 1 WHERE spent = 0`, `DELETE FROM pair_guesses`} {
				if _, err := t.ExecContext(ctx, q); err != nil {
					return pairCode{}, err
				}
			}
			msg = "wrong pairing code; too many wrong codes were tried, so every open code was cancelled: run ccrelay pair for a new one"
		}
		if err := t.Commit(); err != nil {
			return pairCode{}, err
		}
		return pairCode{}, errPair{msg}
	case err != nil:
		return pairCode{}, err
	case spent != 0:
		return pairCode{}, errPair{"this pairing code was already used (or cancelled); run ccrelay pair for a new one"}
	case !now.Before(time.UnixMilli(expires)):
		return pairCode{}, errPair{fmt.Sprintf("this pairing code expired (codes last %v); run ccrelay pair for a new one", PairCodeTTL)}
	}
	// Spent once, whichever relay redeems it first.
	res, err := t.ExecContext(ctx, `UPDATE pairing_codes SET spent = ? WHERE key = ? AND spent = 0`, spentRedeemed, k[:])
	if err != nil {
		return pairCode{}, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return pairCode{}, errPair{"this pairing code was already used (or cancelled); run ccrelay pair for a new one"}
	}
	return c, t.Commit()
}

// pairRequest is POST /api/pair (a machine asks for a code).
type pairRequest struct {
	Role       string `json:"role"`                 // device (default) or machine
	MachineKey []byte `json:"machineKey,omitempty"` // the asking machine's X25519 public key (for end-to-end encryption)
}

type pairAnswer struct {
	Code    string `json:"code"`
	Role    string `json:"role"`
	Expires int64  `json:"expires"` // ms since the epoch
	// URL is the relay's address as a phone opens it (the public URL, or
	// the address this request reached).
	URL string `json:"url"`
}

// redeemRequest is POST /api/pair/redeem.
type redeemRequest struct {
	Code      string `json:"code"`
	Name      string `json:"name"`
	PublicKey []byte `json:"publicKey,omitempty"` // the redeemer's X25519 public key
	Confirm   []byte `json:"confirm,omitempty"`   // HMAC over both keys keyed by the code
}

type redeemAnswer struct {
	Credential string `json:"credential"`
	ID         string `json:"id"`
	Name       string `json:"name"`
	Role       string `json:"role"`
	MachineKey []byte `json:"machineKey,omitempty"`
}

// answerRequest is POST /api/pair/answer: the device that redeemed code
// accepts the machine key the relay passed on (accepted: its tag) or
// refuses it (refused: why).
type answerRequest struct {
	Code     string `json:"code"`
	Accepted []byte `json:"accepted,omitempty"`
	Refused  string `json:"refused,omitempty"`
}

type renameRequest struct {
	Name string `json:"name"` // the one renamed (its name or id); "" in /api/me
	To   string `json:"to"`
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPairBody))
	if err != nil {
		http.Error(w, fmt.Sprintf("request body: %v (at most %d bytes)", err, maxPairBody), http.StatusRequestEntityTooLarge)
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		http.Error(w, "request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// publicBase is the relay's address for links: the public URL, or the
// scheme and host this request reached.
func (s *Server) publicBase(r *http.Request) string {
	if u := s.Transport.PublicURL; u != nil {
		return u.Scheme + "://" + u.Host
	}
	scheme := "http"
	if s.secure(r) {
		scheme = "https"
	}
	return scheme + "://" + s.requestHost(r)
}

// accountRoutes adds the pairing and device management endpoints.
func (s *Server) accountRoutes(mux *http.ServeMux) {
	machine := func(h http.HandlerFunc) http.Handler { return s.auth(s.only(h, RoleMachine)) }
	any := func(h http.HandlerFunc) http.Handler { return s.auth(h) }
	mux.Handle("POST /api/pair", machine(s.servePair))
	mux.HandleFunc("POST /api/pair/redeem", s.serveRedeem)
	mux.Handle("GET /api/pair/result", machine(s.servePairResult))
	mux.Handle("POST /api/pair/answer", s.auth(s.only(http.HandlerFunc(s.servePairAnswer), RoleDevice)))
	mux.Handle("GET /api/devices", machine(s.serveDevices))
	mux.Handle("POST /api/devices/revoke", machine(s.serveRevoke))
	mux.Handle("POST /api/devices/rename", machine(s.serveRename))
	mux.Handle("GET /api/me", any(s.serveMe))
	mux.Handle("POST /api/me/rename", any(s.serveRenameMe))
	mux.Handle("POST /api/me/signout", any(s.serveSignOut))
}

func (s *Server) servePair(w http.ResponseWriter, r *http.Request) {
	var req pairRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Role == "" {
		req.Role = RoleDevice
	}
	if req.Role != RoleDevice && req.Role != RoleMachine {
		http.Error(w, "role must be device or machine", http.StatusBadRequest)
		return
	}
	if len(req.MachineKey) > maxPublicKey {
		http.Error(w, "machineKey is too long", http.StatusBadRequest)
		return
	}
	p := principalFrom(r.Context())
	code, exp, err := s.pairing.issue(r.Context(), p.account, req.Role, p.cred.ID, req.MachineKey)
	if err != nil {
		s.storeFailed("pairing code", "", err)
		http.Error(w, "the relay's store failed", http.StatusServiceUnavailable)
		return
	}
	s.log.Info("pairing code made", "role", req.Role, "by", nameOf(p), "expires", exp.Format(time.TimeOnly))
	writeJSON(w, http.StatusOK, pairAnswer{Code: code, Role: req.Role, Expires: exp.UnixMilli(), URL: s.publicBase(r)})
}

// servePairResult tells the machine that asked for a code what became of
// it: 202 while it is not redeemed, 200 with the PairResult once it is,
// 404 for a code that is not this machine's or is spent or expired.
func (s *Server) servePairResult(w http.ResponseWriter, r *http.Request) {
	res, ok, err := s.pairing.resultOf(r.Context(), r.URL.Query().Get("code"), principalFrom(r.Context()).cred.ID)
	var pe errPair
	switch {
	case errors.As(err, &pe):
		http.Error(w, err.Error(), http.StatusNotFound)
	case err != nil:
		s.storeFailed("pairing result", "", err)
		http.Error(w, "the relay's store failed", http.StatusServiceUnavailable)
	case !ok:
		writeJSON(w, http.StatusAccepted, map[string]any{"redeemed": false})
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// servePairAnswer takes the redeeming device's answer to its pairing and
// keeps it for the machine (GET /api/pair/result). A refusal revokes the
// device's credential at once: the pairing failed, and nothing of it stays.
func (s *Server) servePairAnswer(w http.ResponseWriter, r *http.Request) {
	var req answerRequest
	if !readJSON(w, r, &req) {
		return
	}
	// Shown in the machine's terminal: no control characters.
	req.Refused = strings.Join(strings.FieldsFunc(clip(req.Refused, maxRefusal), func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
	}), " ")
	if (len(req.Accepted) == 0) == (req.Refused == "") || len(req.Accepted) > maxPublicKey {
		http.Error(w, "give either accepted (the acceptance tag) or refused (why)", http.StatusBadRequest)
		return
	}
	p := principalFrom(r.Context())
	err := s.pairing.setAnswer(r.Context(), req.Code, p.cred.ID, req.Accepted, req.Refused)
	var pe errPair
	switch {
	case errors.As(err, &pe):
		http.Error(w, pe.msg, http.StatusNotFound)
		return
	case err != nil:
		s.storeFailed("pairing answer", "", err)
		http.Error(w, "the relay's store failed", http.StatusServiceUnavailable)
		return
	}
	if req.Refused == "" {
		s.log.Info("pairing accepted by the device", "name", p.cred.Name)
		writeJSON(w, http.StatusOK, map[string]any{"accepted": true})
		return
	}
	s.revoke(r.Context(), w, p.cred, "it refused the pairing: "+req.Refused)
}

func nameOf(p principal) string {
	if p.role == RoleBootstrap {
		return "the relay token"
	}
	return p.cred.Name
}

// serveRedeem spends a pairing code. Wrong codes count as failed logins
// of their address (and, all together, against PairGuessLimit).
func (s *Server) serveRedeem(w http.ResponseWriter, r *http.Request) {
	l := s.Limits.withDefaults()
	key, now := addrKey(s.clientAddr(r)), s.now()
	if until, blocked := s.logins.blocked(key, now, l); blocked {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(until.Sub(now).Seconds()))))
		http.Error(w, "too many wrong codes or failed logins from this address; try again later", http.StatusTooManyRequests)
		return
	}
	var req redeemRequest
	if !readJSON(w, r, &req) {
		return
	}
	if len(req.PublicKey) > maxPublicKey || len(req.Confirm) > maxPublicKey {
		http.Error(w, "publicKey or confirm is too long", http.StatusBadRequest)
		return
	}
	pc, err := s.pairing.redeem(r.Context(), req.Code)
	var pe errPair
	if errors.As(err, &pe) {
		n := s.logins.failed(key, now, l)
		s.log.Warn("pairing code refused", "addr", s.clientAddr(r), "why", pe.msg, "failures", n)
		http.Error(w, pe.msg, http.StatusForbidden)
		return
	}
	if err != nil {
		s.storeFailed("pairing redeem", "", err)
		http.Error(w, "the relay's store failed", http.StatusServiceUnavailable)
		return
	}
	name := CleanName(req.Name)
	if name == "" {
		name = pc.role
	}
	cred, secret, err := s.store.AddCredential(r.Context(), pc.account, pc.role, name, req.PublicKey)
	if err != nil {
		if cerr := s.pairing.cancel(context.WithoutCancel(r.Context()), req.Code); cerr != nil {
			s.storeFailed("pairing cancel", "", cerr)
		}
	}
	if errors.Is(err, ErrTooManyCredentials) {
		s.log.Warn("pairing refused", "err", err)
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	if err != nil {
		s.log.Error("pairing", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if err := s.pairing.setResult(r.Context(), req.Code, PairResult{ID: cred.ID, Name: cred.Name, Role: cred.Role, PublicKey: req.PublicKey, Confirm: req.Confirm}); err != nil {
		s.storeFailed("pairing result", "", err)
	}
	s.log.Info("paired", "role", cred.Role, "name", cred.Name, "addr", s.clientAddr(r))
	if cred.Role == RoleDevice && len(cred.PublicKey) == 32 {
		s.tellDevices(r.Context(), pc.account)
	}
	writeJSON(w, http.StatusOK, redeemAnswer{Credential: secret, ID: cred.ID, Name: cred.Name, Role: cred.Role, MachineKey: pc.machineKey})
}

func (s *Server) serveDevices(w http.ResponseWriter, r *http.Request) {
	list, err := s.store.Credentials(r.Context(), ownerFrom(r.Context()))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if list == nil {
		list = []Credential{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	var req renameRequest
	if !readJSON(w, r, &req) {
		return
	}
	c, err := s.store.FindCredential(r.Context(), ownerFrom(r.Context()), req.Name)
	if err != nil {
		writeCredErr(w, err)
		return
	}
	s.revoke(r.Context(), w, c, "revoked by "+nameOf(principalFrom(r.Context())))
}

// revoke deletes c and closes its connections, then answers.
func (s *Server) revoke(ctx context.Context, w http.ResponseWriter, c Credential, why string) {
	if err := s.store.DeleteCredential(ctx, c.Account, c.ID); err != nil {
		writeCredErr(w, err)
		return
	}
	n := s.closeCredential(c.ID, "this "+c.Role+" was signed out")
	if c.Role == RoleDevice && len(c.PublicKey) == 32 {
		s.tellDevices(ctx, c.Account) // the CLIs wrap no more keys for it
	}
	s.forgetPushDevices(ctx, c.ID)
	s.log.Info("credential revoked", "role", c.Role, "name", c.Name, "why", why, "connections closed", n)
	writeJSON(w, http.StatusOK, map[string]any{"revoked": c.Name, "id": c.ID, "role": c.Role, "closed": n})
}

func writeCredErr(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNoCredential) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	http.Error(w, err.Error(), http.StatusBadRequest)
}

func (s *Server) serveRename(w http.ResponseWriter, r *http.Request) {
	var req renameRequest
	if !readJSON(w, r, &req) {
		return
	}
	c, err := s.store.FindCredential(r.Context(), ownerFrom(r.Context()), req.Name)
	if err != nil {
		writeCredErr(w, err)
		return
	}
	name, err := s.store.RenameCredential(r.Context(), c.Account, c.ID, req.To)
	if err != nil {
		writeCredErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": name, "role": c.Role})
}

// serveMe says who the credential is (the app shows "this device").
func (s *Server) serveMe(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	writeJSON(w, http.StatusOK, map[string]string{"id": p.cred.ID, "name": nameOf(p), "role": p.role})
}

func (s *Server) serveRenameMe(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	if p.cred.ID == "" {
		http.Error(w, "the relay token has no name to change", http.StatusBadRequest)
		return
	}
	var req renameRequest
	if !readJSON(w, r, &req) {
		return
	}
	name, err := s.store.RenameCredential(r.Context(), p.account, p.cred.ID, req.To)
	if err != nil {
		writeCredErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": name, "role": p.role})
}

// serveSignOut revokes the request's own credential.
func (s *Server) serveSignOut(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	if p.cred.ID == "" {
		http.Error(w, "the relay token cannot be signed out; delete the relay's token file to change it", http.StatusBadRequest)
		return
	}
	s.revoke(r.Context(), w, p.cred, "signed out")
}
