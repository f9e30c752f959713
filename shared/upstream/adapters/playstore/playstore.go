// Package playstore serves app_store_b/categories from a category list
// Meridian ships (categories.json, embedded at build time): the store has
// no public API for its categories, and the list changes rarely.
//
// Keeping it current: the file records its sources (the developer console
// help page "Choose a category and tags for your app or game", and the
// category codes of the store's /store/apps/category/<CODE> pages) and the
// date it was last reviewed. It is reviewed by hand against the published
// list whenever the store announces category changes and at least every
// six months; the package test checks that the file is well-formed
// (unique upper-case-with-underscores codes, non-empty names and groups,
// sources and review date present).
package playstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/meridian-data/meridian/shared/upstream"
)

// Name is the provider's internal name.
const Name = "play_categories"

//go:embed categories.json
var categoriesFile []byte

// categoryList is the shipped file.
type categoryList struct {
	About      string     `json:"about"`
	Sources    []string   `json:"sources"`
	SourceNote string     `json:"source_note"`
	Reviewed   string     `json:"reviewed"` // YYYY-MM-DD
	Categories []Category `json:"categories"`
}

// Category is one store category.
type Category struct {
	Code string `json:"code"`
	Name string `json:"name"`
	// Group is "apps" or "games" for the categories a listing can be in,
	// "collection" for browse collections spanning categories.
	Group string `json:"group"`
}

// Categories is the data of app_store_b/categories: the whole list in one
// page.
type Categories struct {
	Items   []Category `json:"items"`
	Count   int        `json:"count"`
	HasMore bool       `json:"has_more"`
}

// Provider answers from the shipped list, without a network call.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:     Name,
		Protocol: "Static category list shipped with Meridian (no network)",
		Docs:     "https://support.google.com/googleplay/android-developer/answer/9859673",
		Static:   true,
		Endpoints: map[string]upstream.Adapter{
			"app_store_b/categories": categories,
		},
	}
}

func categories(context.Context, *upstream.Call) (any, error) {
	list, err := load()
	if err != nil {
		return nil, err
	}
	items := append([]Category(nil), list.Categories...) // callers never share the parsed file
	return &Categories{Items: items, Count: len(items), HasMore: false}, nil
}

// load parses the embedded file; a broken file is a build defect the test
// catches, reported here as an unmappable answer rather than a panic.
func load() (*categoryList, error) {
	var list categoryList
	if err := json.Unmarshal(categoriesFile, &list); err != nil {
		return nil, upstream.MalformedFault("shipped category list: %v", err)
	}
	if len(list.Categories) == 0 {
		return nil, fmt.Errorf("shipped category list is empty")
	}
	return &list, nil
}
