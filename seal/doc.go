// Package seal is ccrelay's end-to-end cryptography: what a machine and a
// device use so that the relay stores and forwards only ciphertext.
//
//   - Machine key pairs (X25519), kept in a 0600 file in the state folder,
//     and their fingerprints, short enough for a pairing QR code.
//   - Session keys: 256 random bits made by the machine that owns the
//     session. [SessionKey.Seal] and [SessionKey.Open] use AES-256-GCM with
//     the session id, the envelope or command id and the direction as
//     associated data, so a ciphertext moved to another session, position or
//     direction does not open.
//   - Key wrapping: a session key sealed for one device's public key with
//     HPKE (RFC 9180, base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
//     AES-256-GCM), and bound to the machine's own key pair by a tag only the
//     machine could make, so the relay cannot hand a device a key of its own.
//   - Pairing confirmation: an HMAC-SHA256 over both public keys keyed by a
//     secret that only the QR code carries.
//
// Every text form is unpadded base64url, ready for JSON. The browser's twin
// is web/static/seal.js; docs/security.md describes the formats byte by byte
// and the threat model.
package seal
