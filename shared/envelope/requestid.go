package envelope

import (
	"encoding/hex"

	"github.com/google/uuid"
)

// NewRequestID returns req_ followed by a time-ordered unique id (UUIDv7,
// hex), so request ids sort by creation in ledgers and logs.
func NewRequestID() string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return "req_" + hex.EncodeToString(id[:])
}
