package store

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

func randomID(prefix string) string {
	b := make([]byte, 15)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return prefix + strings.ToLower(idEncoding.EncodeToString(b))
}

// NewAccountID returns acct_ plus 24 random base32 characters.
func NewAccountID() string { return randomID("acct_") }

// NewKeyID returns key_ plus 24 random base32 characters.
func NewKeyID() string { return randomID("key_") }

// NewEntryID returns a time-ordered ledger entry id (UUIDv7, hex), so
// entries sort newest first by id.
func NewEntryID() string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return "txn_" + hex.EncodeToString(id[:])
}

// resourceEncoding spells ids of resources a caller names in paths
// (monitors, jobs): lowercase letters and digits only.
var resourceEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

func resourceID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + resourceEncoding.EncodeToString(b[:])
}

// NewMonitorID returns mon_ plus 26 characters of 128 random bits.
func NewMonitorID() string { return resourceID("mon_") }

// NewJobID returns job_ plus 26 characters of 128 random bits.
func NewJobID() string { return resourceID("job_") }
