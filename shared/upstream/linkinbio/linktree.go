package linkinbio

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// The part of Linktree's __NEXT_DATA__ that is read. Fields absent from a
// page stay nil, so a missing field is told from an empty one.
type ltData struct {
	Props *struct {
		PageProps *struct {
			Account     *ltAccount  `json:"account"`
			Links       *[]ltLink   `json:"links"`
			SocialLinks *[]ltSocial `json:"socialLinks"`
			PageTitle   *string     `json:"pageTitle"`
			Description *string     `json:"description"`
		} `json:"pageProps"`
	} `json:"props"`
}

type ltAccount struct {
	Username          *string     `json:"username"`
	PageTitle         *string     `json:"pageTitle"`
	Description       *string     `json:"description"`
	ProfilePictureURL *string     `json:"profilePictureUrl"`
	Links             *[]ltLink   `json:"links"`
	SocialLinks       *[]ltSocial `json:"socialLinks"`
}

type ltLink struct {
	Type   *string `json:"type"`
	Title  *string `json:"title"`
	URL    *string `json:"url"`
	Locked *bool   `json:"locked"`
}

type ltSocial struct {
	Type *string `json:"type"`
	URL  *string `json:"url"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// parseLinktree reads a Linktree profile's __NEXT_DATA__.
func parseLinktree(page []byte, _ *url.URL, _ *service) (*Page, error) {
	raw, err := htmldata.NextData(page)
	if err != nil {
		return nil, err
	}
	var d ltData
	if err := json.Unmarshal(raw, &d); err != nil {
		// A field of another type than the format's: the format changed.
		return nil, upstream.MalformedFault("linktree __NEXT_DATA__ of a %d-byte page does not have the profile format (%s)",
			len(page), typeProblem(err))
	}
	if d.Props == nil || d.Props.PageProps == nil {
		return nil, upstream.MalformedFault("linktree __NEXT_DATA__ of a %d-byte page has no props.pageProps", len(page))
	}
	pp := d.Props.PageProps
	acc := pp.Account
	if acc == nil {
		return nil, upstream.MalformedFault("linktree __NEXT_DATA__ of a %d-byte page has no props.pageProps.account", len(page))
	}
	if strings.TrimSpace(str(acc.Username)) == "" {
		return nil, upstream.MalformedFault("linktree account of a %d-byte page has no username", len(page))
	}
	links := pp.Links
	if links == nil {
		links = acc.Links
	}
	if links == nil {
		return nil, upstream.MalformedFault("linktree __NEXT_DATA__ of a %d-byte page has no links list", len(page))
	}
	socials := acc.SocialLinks
	if socials == nil {
		socials = pp.SocialLinks
	}

	p := &Page{
		Title:     clean(firstNonEmpty(str(acc.PageTitle), str(pp.PageTitle), str(acc.Username)), maxTitle),
		Bio:       clean(firstNonEmpty(str(acc.Description), str(pp.Description)), maxBio),
		AvatarURL: avatar(str(acc.ProfilePictureURL), nil),
	}
	c := newCollector(p)
	for _, l := range *links {
		// A header has no URL; a locked (sensitive) link has none until
		// the visitor confirms: neither is a link to keep.
		if strings.EqualFold(str(l.Type), "HEADER") {
			continue
		}
		c.add(str(l.Title), str(l.URL), nil)
	}
	if socials != nil {
		for _, s := range *socials {
			c.add(socialTitle(str(s.Type)), str(s.URL), nil)
		}
	}
	return p, nil
}

// socialTitle names a Linktree social icon by its type (INSTAGRAM →
// "instagram", EMAIL_ADDRESS → "email address").
func socialTitle(typ string) string {
	return strings.ReplaceAll(strings.ToLower(typ), "_", " ")
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// typeProblem describes a decoding error without the page's content.
func typeProblem(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return "field " + te.Field + " is a JSON " + te.Value
	}
	return "invalid JSON"
}
