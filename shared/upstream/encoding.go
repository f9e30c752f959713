package upstream

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"strings"

	"github.com/andybalholm/brotli"
)

// DecodeContent undoes a content-encoding (gzip, br, deflate, or a list of them
// in the order applied: pages and recorded answers), capping the result at MaxBody so a small
// compressed body cannot expand without bound.
func DecodeContent(body []byte, encoding string) ([]byte, error) {
	codings := strings.Split(encoding, ",")
	for i := len(codings) - 1; i >= 0; i-- {
		var r io.Reader
		var err error
		switch coding := strings.ToLower(strings.TrimSpace(codings[i])); coding {
		case "", "identity":
			continue
		case "gzip", "x-gzip":
			r, err = gzip.NewReader(bytes.NewReader(body))
		case "br":
			r = brotli.NewReader(bytes.NewReader(body))
		case "deflate":
			r, err = zlib.NewReader(bytes.NewReader(body))
		default:
			return nil, MalformedFault("the body has an unsupported content-encoding %q", coding)
		}
		var out []byte
		if err == nil {
			out, err = io.ReadAll(io.LimitReader(r, MaxBody+1))
		}
		if err != nil {
			return nil, MalformedFault("the %s body does not decode: %v", strings.TrimSpace(codings[i]), err)
		}
		if len(out) > MaxBody {
			return nil, MalformedFault("the decoded body is larger than %d bytes", MaxBody)
		}
		body = out
	}
	return body, nil
}
