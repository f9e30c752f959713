package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// NewSecret returns prefix plus 43 base64url characters of 32 random bytes.
func NewSecret(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand does not fail on supported platforms
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Hash is the stored form of a key or console token: hex SHA-256.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NewKey mints an API key (spec 2.6): the full key, shown once, and the
// record to store, which holds only its hash, 7-character prefix and last 4.
func NewKey(accountID, name string, creditLimit *int64) (string, store.Key) {
	key := NewSecret("mn_")
	return key, store.Key{
		AccountID:   accountID,
		Hash:        Hash(key),
		Prefix:      key[:7],
		Last4:       key[len(key)-4:],
		Name:        name,
		CreditLimit: creditLimit,
	}
}

// StoreKeys authenticates keys against the store by hash, reading the
// key's current state on every request.
type StoreKeys struct{ Store store.Store }

// Authenticate implements KeySource.
func (s StoreKeys) Authenticate(ctx context.Context, key string) (Principal, error) {
	return s.AuthenticateHash(ctx, Hash(key))
}

// AuthenticateHash is Authenticate for a key known by its stored hash: a
// call Meridian makes for an account (a monitor's run), which never holds
// the key itself. The key's current state applies as for any request.
func (s StoreKeys) AuthenticateHash(ctx context.Context, hash string) (Principal, error) {
	k, err := s.Store.KeyByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) || (err == nil && k.Status != store.KeyActive) {
		return Principal{}, ErrUnknownKey
	}
	if err != nil {
		return Principal{}, err
	}
	return Principal{AccountID: k.AccountID, KeyID: k.ID, KeyPrefix: k.Prefix, KeyHash: k.Hash}, nil
}

// Enter authenticates key and admits its request in one step (store.Gate):
// ErrUnknownKey for a key that is unknown, revoked or deleted.
func Enter(ctx context.Context, g store.Gate, key, requestID string, now time.Time, rules store.LimitRules, slot bool) (Principal, store.Admission, error) {
	return EnterHash(ctx, g, Hash(key), requestID, now, rules, slot)
}

// EnterHash is Enter for a key known by its stored hash (AuthenticateHash).
func EnterHash(ctx context.Context, g store.Gate, hash, requestID string, now time.Time, rules store.LimitRules, slot bool) (Principal, store.Admission, error) {
	k, a, err := g.Enter(ctx, hash, requestID, now, rules, slot)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrKeyInactive) {
		return Principal{}, store.Admission{}, ErrUnknownKey
	}
	if err != nil {
		return Principal{}, store.Admission{}, err
	}
	return Principal{AccountID: k.AccountID, KeyID: k.ID, KeyPrefix: k.Prefix, KeyHash: hash}, a, nil
}

// ConsoleTokenPrefix starts every console token.
const ConsoleTokenPrefix = "mc_"

// CreateAccount opens an account and mints its console token, returned
// once; only its hash is stored. The opening credits are a grant entry
// naming requestID, written with the account.
func CreateAccount(ctx context.Context, s store.Store, credits int64, requestID string) (store.Account, string, error) {
	token := NewSecret(ConsoleTokenPrefix)
	acct, err := s.CreateAccount(ctx, credits, Hash(token), requestID)
	return acct, token, err
}
