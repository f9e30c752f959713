package replay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"html"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Redacted replaces a removed credential in recorded text.
const Redacted = "REDACTED"

// minSecretLen is the shortest configured value removed wherever it
// occurs inside text (as the runner's log redaction does): a shorter one
// would cut into ordinary words. Shorter values are still removed where
// they stand whole (a query value, a JSON string).
const minSecretLen = 4

// Sanitizer removes credentials from what the recorder writes: the
// configured secret values in every form a request or answer may carry
// them, credential-named fields, and the parameters that sign URLs. It is
// pure: the same input always gives the same output.
type Sanitizer struct {
	whole map[string]bool // every secret value, for whole-value comparisons
	forms []string        // every encoded form of every long-enough secret, longest first
}

// NewSanitizer is a sanitiser for the configured secret values (empty
// values are ignored).
func NewSanitizer(secrets []string) *Sanitizer {
	s := &Sanitizer{whole: map[string]bool{}}
	seen := map[string]bool{}
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		s.whole[secret] = true
		if len(secret) < minSecretLen {
			continue
		}
		for _, form := range secretForms(secret) {
			if form != "" && !seen[form] {
				seen[form] = true
				s.forms = append(s.forms, form)
			}
		}
	}
	// Longest first, so a secret holding another is removed whole.
	sort.Slice(s.forms, func(i, j int) bool {
		if len(s.forms[i]) != len(s.forms[j]) {
			return len(s.forms[i]) > len(s.forms[j])
		}
		return s.forms[i] < s.forms[j]
	})
	return s
}

// secretForms are the ways a value travels: as it is, URL-encoded (query
// and path, upper- and lower-case hex), JSON-escaped (with and without
// HTML escaping, and escaped twice for JSON inside a JSON string),
// HTML-escaped, and in base64 (alone and as a Basic credential's user).
func secretForms(secret string) []string {
	jsonEscaped := func(v string, escapeHTML bool) string {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(escapeHTML)
		_ = enc.Encode(v)
		out := strings.TrimSpace(b.String())
		return out[1 : len(out)-1]
	}
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret), html.EscapeString(secret)}
	for _, f := range forms[1:3] {
		forms = append(forms, lowerHex(f))
	}
	for _, escapeHTML := range []bool{true, false} {
		once := jsonEscaped(secret, escapeHTML)
		forms = append(forms, once, jsonEscaped(once, escapeHTML))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		forms = append(forms, enc.EncodeToString([]byte(secret)), enc.EncodeToString([]byte(secret+":")))
	}
	return forms
}

// lowerHex lower-cases the hex digits of percent escapes.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = bytes.ToLower(b[i+1 : i+2])[0], bytes.ToLower(b[i+2 : i+3])[0]
		}
	}
	return string(b)
}

// IsSecret reports whether v is a configured secret value.
func (s *Sanitizer) IsSecret(v string) bool { return s.whole[v] }

// Leaks reports whether b holds any configured secret in any known form:
// the recorder's last look before it writes a file.
func (s *Sanitizer) Leaks(b []byte) bool {
	for _, form := range s.forms {
		if bytes.Contains(b, []byte(form)) {
			return true
		}
	}
	return false
}

// removeSecrets replaces every form of every secret in text.
func (s *Sanitizer) removeSecrets(text string) string {
	if s.whole[text] {
		return Redacted
	}
	for _, form := range s.forms {
		if strings.Contains(text, form) {
			text = strings.ReplaceAll(text, form, Redacted)
		}
	}
	return text
}

// Text sanitises free text (an HTML page, a header value, a JSON string):
// secrets removed, and every URL in it stripped of the query parameters
// that sign or authorise it (the rest of the URL is kept).
func (s *Sanitizer) Text(text string) string {
	return StripSignedURLs(s.removeSecrets(text))
}

// JSON sanitises a JSON document: every string (object keys included) as
// Text, base64 strings holding text (a service's page body) decoded,
// sanitised and encoded again, and the string values of credential-named
// fields replaced, also in {"name": "cookie", "value": "..."} pairs. It
// returns the document re-encoded (numbers kept exactly, keys sorted, no
// HTML escaping), or ok false when raw is not JSON.
func (s *Sanitizer) JSON(raw []byte) (out []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // more than one value
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s.value(v)); err != nil {
		return nil, false
	}
	return bytes.TrimSpace(b.Bytes()), true
}

// value sanitises one decoded JSON value.
func (s *Sanitizer) value(v any) any {
	switch t := v.(type) {
	case string:
		return s.str(t)
	case []any:
		for i := range t {
			t[i] = s.value(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		// A header or cookie given as a name/value pair.
		name, _ := t["name"].(string)
		pairSecret := name != "" && CredentialName(name)
		for k, x := range t {
			if CredentialName(k) && !exemptField(k) || pairSecret && strings.EqualFold(k, "value") {
				out[s.str(k)] = redactStrings(x)
				continue
			}
			out[s.str(k)] = s.value(x)
		}
		return out
	}
	return v // numbers, booleans, null
}

// redactStrings replaces every non-empty string in a credential's value,
// however deep; numbers and booleans say nothing secret and stay.
func redactStrings(v any) any {
	switch t := v.(type) {
	case string:
		if t == "" {
			return t
		}
		return Redacted
	case []any:
		for i := range t {
			t[i] = redactStrings(t[i])
		}
		return t
	case map[string]any:
		for k, x := range t {
			t[k] = redactStrings(x)
		}
		return t
	}
	return v
}

// exemptField are credential-looking JSON field names that ordinary data
// uses ("key" names a thing; "auth" and "sig" are too short to tell).
func exemptField(name string) bool {
	switch normalise(name) {
	case "key", "auth", "sig", "sid", "policy":
		return true
	}
	return false
}

// str sanitises one JSON string, looking inside base64 that holds text.
func (s *Sanitizer) str(v string) string {
	if decoded, enc, ok := base64Text(v); ok {
		if clean := s.Text(decoded); clean != decoded {
			return enc.EncodeToString([]byte(clean))
		}
		return v
	}
	return s.Text(v)
}

// base64Text decodes v when it is base64 (standard alphabet, padded, at
// least 16 characters) of valid UTF-8 text: a service's page body, or a
// request body it forwards.
func base64Text(v string) (string, *base64.Encoding, bool) {
	if len(v) < 16 || len(v)%4 != 0 || strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != "" {
		return "", nil, false
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", nil, false
	}
	return string(b), base64.StdEncoding, true
}

// normalise lower-cases a parameter or header name and drops its
// separators, so api_key, Api-Key and apiKey compare equal.
func normalise(name string) string {
	name = strings.ToLower(name)
	return strings.NewReplacer("-", "", "_", "", ".", "", " ", "").Replace(name)
}

// credentialNames are names (normalised) of parameters, headers and
// fields that carry a credential or a session.
var credentialNames = map[string]bool{
	"key": true, "apikey": true, "xapikey": true, "token": true, "accesstoken": true, "refreshtoken": true,
	"idtoken": true, "sessiontoken": true, "securitytoken": true, "session": true, "sessionid": true, "sid": true,
	"auth": true, "authorization": true, "proxyauthorization": true, "authtoken": true, "signature": true, "sig": true,
	"password": true, "passwd": true, "secret": true, "clientsecret": true, "appsecret": true, "cookie": true,
	"setcookie": true, "credential": true, "credentials": true, "jwt": true, "accessjwt": true, "refreshjwt": true,
	"bearer": true, "xrapidapikey": true, "subscriptionkey": true, "ocpapimsubscriptionkey": true,
}

// CredentialName reports whether a header, query parameter or field name
// looks like it carries a credential: a known name, any x-amz-* or
// x-goog-* (request signing), or a name ending in token, secret,
// password, apikey or signature (csrfToken, x-csrf-token, client_secret).
func CredentialName(name string) bool {
	n := normalise(name)
	if credentialNames[n] || strings.HasPrefix(n, "xamz") || strings.HasPrefix(n, "xgoog") {
		return true
	}
	for _, suffix := range []string{"token", "secret", "password", "apikey", "signature", "sessionid"} {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	return false
}

// signingNames are the URL parameters (normalised) that sign a URL or
// scope its access, besides every credential name: CloudFront's
// Key-Pair-Id, Google's GoogleAccessId, Akamai's tokens, and the hashes of
// Facebook's and Instagram's CDNs (oh, _nc_ohc, _nc_sid, _nc_gid).
var signingNames = map[string]bool{
	"keypairid": true, "googleaccessid": true, "hmac": true, "hdnts": true, "hdnea": true,
	"oh": true, "ncohc": true, "ncsid": true, "ncgid": true,
}

// pairedNames go with a signature (its expiry, a CloudFront policy, the
// CDNs' oe): removed when the URL is signed, kept otherwise (oe=UTF8 in a
// shop's link is no signature).
var pairedNames = map[string]bool{"expires": true, "expiry": true, "exp": true, "expiration": true, "oe": true, "policy": true}

// signingParam reports whether a URL parameter signs or authorises it.
func signingParam(name string) bool {
	return CredentialName(name) || signingNames[normalise(name)]
}

// urlInText finds absolute URLs in text, also where a JSON encoding wrote
// their slashes as \/ and their & as \u0026.
var urlInText = regexp.MustCompile(`(?i)https?:(?://|\\/\\/)(?:[^\s"'<>\\()]|\\/|\\u00[0-9a-f]{2})+`)

// paramSeparator splits a query as text writes it: &, or &amp; and
// &#38; in HTML, or \u0026 in JSON.
var paramSeparator = regexp.MustCompile(`(?i)&amp;|&#0*38;|&#x0*26;|\\u0026|&`)

// StripSignedURLs removes the signing and credential parameters from
// every URL in text, keeping the rest of each URL as written.
func StripSignedURLs(text string) string {
	if !strings.Contains(text, "http") && !strings.Contains(text, "HTTP") {
		return text
	}
	return urlInText.ReplaceAllStringFunc(text, stripURL)
}

// stripURL drops the signing parameters of one URL as written in text.
func stripURL(raw string) string {
	q := strings.IndexByte(raw, '?')
	if q < 0 {
		return raw
	}
	head, query, fragment := raw[:q], raw[q+1:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, fragment = query[:h], query[h:]
	}
	seps := paramSeparator.FindAllString(query, -1)
	params := paramSeparator.Split(query, -1)
	sep := "&"
	if len(seps) > 0 {
		sep = seps[0]
	}
	name := func(p string) string {
		n, _, _ := strings.Cut(strings.ReplaceAll(strings.ToLower(p), `\u003d`, "="), "=")
		if u, err := url.QueryUnescape(n); err == nil {
			n = u
		}
		return n
	}
	signed := false
	for _, p := range params {
		if signingParam(name(p)) {
			signed = true
		}
	}
	if !signed {
		return raw
	}
	kept := params[:0:0]
	for _, p := range params {
		n := name(p)
		if signingParam(n) || pairedNames[normalise(n)] {
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 {
		return head + fragment
	}
	return head + "?" + strings.Join(kept, sep) + fragment
}
