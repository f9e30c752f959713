package pipeline

import "github.com/meridian-data/meridian/shared/envelope"

// Raw is handler data written as is (not in the envelope), e.g. markdown.
type Raw = envelope.Raw
