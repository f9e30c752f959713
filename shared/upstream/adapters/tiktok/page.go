package tiktok

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"

	"golang.org/x/net/html"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Site is the public profile pages as a pages.Site: the profile's second
// route, after the Research API (adapters.All lists the direct route and
// the unblocking services after it).
func Site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  Origin,
		Hosts:   []string{"www.tiktok.com", "tiktok.com"},
		Header:  pages.BrowserHeader("en-US,en;q=0.9"),
		Blocked: blocked,
		Operations: map[string]pages.Operation{
			ProfileEndpoint: {Build: profileRequest, Parse: parseProfilePage},
		},
	}
}

func profileRequest(c *upstream.Call) (pages.Request, error) {
	handle, err := handleOf(c)
	if err != nil {
		return pages.Request{}, err
	}
	return pages.Request{Path: "/@" + handle}, nil
}

// The page's data scripts.
const (
	universalID = "__UNIVERSAL_DATA_FOR_REHYDRATION__"
	sigiID      = "SIGI_STATE"
)

// blocked recognises what is not the profile: the bot-protection pages
// htmldata.Challenge knows, the site's own proof-of-work check (a near
// empty page of hidden elements with ids cs and wci that its script
// solves before reloading), and a login wall (the services report the
// redirect to /login). A page that carries the profile's data is never a
// block, whatever else it holds. These fail over to the next route.
func blocked(p *pages.Page) (string, bool) {
	if bytes.Contains(p.Body, []byte(universalID)) || bytes.Contains(p.Body, []byte(sigiID)) {
		return "", false
	}
	if reason, ok := htmldata.Challenge(p.Body); ok {
		return reason, true
	}
	if u, err := url.Parse(p.URL); err == nil && strings.HasPrefix(u.Path, "/login") {
		return "a login wall (redirected to the login page)", true
	}
	if ids := elementIDs(p.Body); ids["cs"] && ids["wci"] {
		return "the site's bot check (a proof-of-work challenge page)", true
	}
	return "", false
}

// elementIDs are the id attributes of a page's elements, read with the
// HTML tokenizer.
func elementIDs(page []byte) map[string]bool {
	ids := map[string]bool{}
	z := html.NewTokenizer(bytes.NewReader(page))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ids
		case html.StartTagToken, html.SelfClosingTagToken:
			_, more := z.TagName()
			for more {
				var k, v []byte
				k, v, more = z.TagAttr()
				if string(k) == "id" {
					ids[string(v)] = true
				}
			}
		}
	}
}

// pageUser and pageStats are the account as the page describes it, in
// either shape (the rehydration data's userInfo, SIGI_STATE's UserModule).
type pageUser struct {
	ID             flexID  `json:"id"`
	UniqueID       string  `json:"uniqueId"`
	Nickname       *string `json:"nickname"`
	AvatarLarger   *string `json:"avatarLarger"`
	AvatarMedium   *string `json:"avatarMedium"`
	AvatarThumb    *string `json:"avatarThumb"`
	Signature      *string `json:"signature"`
	Verified       *bool   `json:"verified"`
	SecUID         *string `json:"secUid"`
	PrivateAccount *bool   `json:"privateAccount"`
	BioLink        *struct {
		Link string `json:"link"`
	} `json:"bioLink"`
	CreateTime flexInt `json:"createTime"`
}

type pageStats struct {
	FollowerCount  flexInt `json:"followerCount"`
	FollowingCount flexInt `json:"followingCount"`
	HeartCount     flexInt `json:"heartCount"`
	Heart          flexInt `json:"heart"`
	VideoCount     flexInt `json:"videoCount"`
}

type userDetail struct {
	UserInfo *struct {
		User    *pageUser  `json:"user"`
		Stats   *pageStats `json:"stats"`
		StatsV2 *pageStats `json:"statsV2"`
	} `json:"userInfo"`
	StatusCode flexInt `json:"statusCode"`
}

type sigiState struct {
	UserModule *struct {
		Users map[string]pageUser  `json:"users"`
		Stats map[string]pageStats `json:"stats"`
	} `json:"UserModule"`
	UserPage *struct {
		StatusCode flexInt `json:"statusCode"`
	} `json:"UserPage"`
}

// The page's status codes for an account it does not show.
var (
	noAccount      = map[int64]bool{10202: true, 10221: true, 10223: true}
	privateAccount = int64(10222)
)

// The page route's _warnings sentences.
const (
	WarnRoundedFollowers = "followers is the page's display count, which the source may round for large accounts."
	WarnPrivate          = "The account is private: its posts are visible only to approved followers."
)

// account is what the page said, whichever shape held it.
type account struct {
	user          pageUser
	exact, shown  *pageStats // statsV2 (exact text), stats (display)
	exactField    string     // where exact counts sit, for follower_source_field
	shownField    string
	private       bool // the page's status says so
	found, absent bool
}

// parseProfilePage maps the profile page.
func parseProfilePage(c *upstream.Call, p *pages.Page) (any, error) {
	handle, err := handleOf(c)
	if err != nil {
		return nil, err
	}
	size := len(p.Body)
	a, sawData, err := readAccount(p.Body, handle)
	switch {
	case err != nil:
		return nil, err
	case a.absent:
		return nil, upstream.NotFoundFault("the site has no public account with this username")
	case !a.found && !sawData:
		return nil, upstream.MalformedFault("no %s or %s data in a %d-byte page", universalID, sigiID, size)
	case !a.found:
		return nil, upstream.MalformedFault("no account in the page's data (%d-byte page)", size)
	}
	u := a.user
	if !strings.EqualFold(u.UniqueID, handle) {
		return nil, upstream.MalformedFault("the page describes another account (%d-byte page)", size)
	}
	h := strings.ToLower(u.UniqueID)
	out := Profile{
		Profile: creator.Profile{ID: str(string(u.ID)), Handle: &h, Name: text(u.Nickname), URL: ptr(profileURL(h)),
			Description: text(u.Signature), AvatarURL: firstText(u.AvatarLarger, u.AvatarMedium, u.AvatarThumb)},
		Verified: u.Verified, SecUID: text(u.SecUID), Private: u.PrivateAccount, CreatedAt: unixTime(u.CreateTime),
	}
	if u.BioLink != nil {
		out.BioLink = str(strings.TrimSpace(u.BioLink.Link))
	}
	if a.private && out.Private == nil {
		out.Private = ptr(true)
	}
	pick := func(get func(*pageStats) *int64) (*int64, bool) {
		if a.exact != nil {
			if v := get(a.exact); v != nil {
				return v, true
			}
		}
		if a.shown != nil {
			return get(a.shown), false
		}
		return nil, false
	}
	var exact bool
	out.Followers, exact = pick(func(s *pageStats) *int64 { return s.FollowerCount.v })
	switch {
	case out.Followers == nil:
		out.Warnings = append(out.Warnings, WarnNoFollowers)
	case exact:
		out.FollowerSourceField = str(a.exactField + ".followerCount")
	default:
		out.FollowerSourceField = str(a.shownField + ".followerCount")
		out.Warnings = append(out.Warnings, WarnRoundedFollowers)
	}
	out.Following, _ = pick(func(s *pageStats) *int64 { return s.FollowingCount.v })
	out.LikesCount, _ = pick(func(s *pageStats) *int64 {
		if s.HeartCount.v != nil {
			return s.HeartCount.v
		}
		return s.Heart.v
	})
	out.PostsCount, _ = pick(func(s *pageStats) *int64 { return s.VideoCount.v })
	if out.Private != nil && *out.Private {
		out.Warnings = append(out.Warnings, WarnPrivate)
	}
	return out, nil
}

// readAccount reads the account from the rehydration data, else from the
// older SIGI_STATE (a JSON script, or an assignment in older pages still).
func readAccount(page []byte, handle string) (a account, sawData bool, err error) {
	if raw, ferr := htmldata.ScriptByID(page, universalID); ferr == nil {
		var doc struct {
			Scope map[string]json.RawMessage `json:"__DEFAULT_SCOPE__"`
		}
		if upstream.DecodeJSON(bytes.TrimSpace(raw), &doc) == nil {
			sawData = true
			if d, ok := doc.Scope["webapp.user-detail"]; ok {
				var ud userDetail
				if err := upstream.DecodeJSON(d, &ud); err != nil {
					return a, true, upstream.MalformedFault("the page's user detail does not decode (%d-byte page)", len(page))
				}
				return fromDetail(ud), true, nil
			}
		}
	}
	raw, ferr := htmldata.ScriptByID(page, sigiID)
	if ferr != nil {
		raw, ferr = htmldata.Assigned(page, sigiID)
	}
	if ferr == nil {
		var s sigiState
		if upstream.DecodeJSON(bytes.TrimSpace(raw), &s) == nil {
			sawData = true
			return fromSigi(s, handle), true, nil
		}
	}
	return a, sawData, nil
}

func fromDetail(ud userDetail) account {
	var a account
	status := int64(0)
	if ud.StatusCode.v != nil {
		status = *ud.StatusCode.v
	}
	info := ud.UserInfo
	if info == nil || info.User == nil || info.User.UniqueID == "" {
		// A private account's page may carry no user at all.
		a.absent = noAccount[status] || status == privateAccount
		return a
	}
	a.found, a.user, a.private = true, *info.User, status == privateAccount
	a.exact, a.shown = info.StatsV2, info.Stats
	a.exactField, a.shownField = "userInfo.statsV2", "userInfo.stats"
	return a
}

func fromSigi(s sigiState, handle string) account {
	var a account
	if s.UserModule != nil {
		for key, u := range s.UserModule.Users {
			if strings.EqualFold(key, handle) || strings.EqualFold(u.UniqueID, handle) {
				if u.UniqueID == "" {
					u.UniqueID = key
				}
				a.found, a.user = true, u
				if st, ok := s.UserModule.Stats[key]; ok {
					a.shown, a.shownField = &st, "UserModule.stats"
				}
				return a
			}
		}
	}
	if s.UserPage != nil && s.UserPage.StatusCode.v != nil {
		status := *s.UserPage.StatusCode.v
		a.absent = noAccount[status] || status == privateAccount
	}
	return a
}

func firstText(v ...*string) *string {
	for _, s := range v {
		if t := text(s); t != nil {
			return t
		}
	}
	return nil
}
