package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/meridian-data/meridian/shared/schemas"
)

// filled is how much of the data came back non-null: its top-level fields
// and, for a list, its first item's fields.
type filled struct {
	Top   fill  `json:"top"`
	Items *int  `json:"items,omitempty"` // rows in items, when the data has an items array
	Item  *fill `json:"item,omitempty"`  // the first item's fields, when there is one
}

type fill struct {
	Filled int `json:"filled"`
	Total  int `json:"total"`
}

func (f *filled) String() string {
	if f == nil {
		return "-"
	}
	s := fmt.Sprintf("%d/%d top", f.Top.Filled, f.Top.Total)
	switch {
	case f.Item != nil:
		s += fmt.Sprintf(", %d/%d item", f.Item.Filled, f.Item.Total)
	case f.Items != nil:
		s += ", 0 items"
	}
	return s
}

// fieldsFilled counts the non-null fields of doc (decoded JSON) at the top
// and in the first item. The fields counted are those the schema declares
// and those present, so a declared field an adapter leaves out counts as
// unfilled; names starting with "_" (_warnings) are notes, not data.
func fieldsFilled(key string, doc any) *filled {
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	top, item := declared(key)
	f := &filled{Top: count(obj, top)}
	if list, ok := obj["items"].([]any); ok {
		n := len(list)
		f.Items = &n
		if n > 0 {
			if first, ok := list[0].(map[string]any); ok {
				c := count(first, item)
				f.Item = &c
			}
		}
	}
	return f
}

func count(obj map[string]any, declared []string) fill {
	var f fill
	seen := map[string]bool{}
	consider := func(name string) {
		if seen[name] || strings.HasPrefix(name, "_") {
			return
		}
		seen[name] = true
		f.Total++
		if obj[name] != nil {
			f.Filled++
		}
	}
	for _, name := range declared {
		consider(name)
	}
	for name := range obj {
		consider(name)
	}
	return f
}

// declared lists the schema's top-level properties and those of its items.
func declared(key string) (top, item []string) {
	raw, ok := schemas.For(key)
	if !ok {
		return nil, nil
	}
	type object struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var doc object
	if json.Unmarshal(raw, &doc) != nil {
		return nil, nil
	}
	for name := range doc.Properties {
		top = append(top, name)
	}
	var items struct {
		Items object `json:"items"`
	}
	if rawItems, ok := doc.Properties["items"]; ok && json.Unmarshal(rawItems, &items) == nil {
		for name := range items.Items.Properties {
			item = append(item, name)
		}
	}
	return top, item
}
