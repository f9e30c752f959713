package canary

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/meridian-data/meridian/shared/schemas"
)

// Fill is how much of an answer's data came back: Rate is the share of the
// data schema's fields that are non-null, per item where the data has an
// items list (the mean over its items; an empty list is 0: a search that
// lost its results has lost everything), else over the top-level fields.
// Fields lists the field paths that were non-null: "name" at the top,
// "items[].title" in an item (non-null in at least one), and nested
// objects' leaves by dotted path ("items[].price.amount").
type Fill struct {
	Rate   float64  `json:"fill_rate"`
	Items  *int     `json:"items,omitempty"` // rows in the items list, when the data has one
	Fields []string `json:"filled_fields"`
}

// itemsField is the list whose items the fill rate is taken over.
const itemsField = "items"

// Measure is the fill of doc (decoded JSON data) of the operation key. The
// fields counted are those the schema declares and those present, so a
// declared field an adapter leaves out counts as null; names starting with
// "_" (_warnings) are notes, not data.
func Measure(key string, doc any) Fill {
	obj, _ := doc.(map[string]any)
	shape := declaredShape(key)
	filled := map[string]bool{}
	var f Fill
	top, topFilled := leaves(obj, shape, "", filled, true)
	list, hasItems := obj[itemsField].([]any)
	_, declaresItems := shape.items()
	switch {
	case hasItems || (declaresItems && obj != nil):
		n := len(list)
		f.Items = &n
		itemShape, _ := shape.items()
		var sum float64
		for _, it := range list {
			item, _ := it.(map[string]any)
			total, got := leaves(item, itemShape, itemsField+"[].", filled, false)
			if total > 0 {
				sum += float64(got) / float64(total)
			}
		}
		if n > 0 {
			f.Rate = sum / float64(n)
		}
	case top > 0:
		f.Rate = float64(topFilled) / float64(top)
	}
	f.Fields = make([]string, 0, len(filled))
	for path := range filled {
		f.Fields = append(f.Fields, path)
	}
	sort.Strings(f.Fields)
	return f
}

// leaves counts the leaf fields of obj under shape (declared, or present),
// marking the non-null ones in filled under prefix. At the top (skipItems)
// the items list is left to its own count.
func leaves(obj map[string]any, shape *objectShape, prefix string, filled map[string]bool, skipItems bool) (total, got int) {
	names := shape.names()
	for name := range obj {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		if strings.HasPrefix(name, "_") || (skipItems && name == itemsField) {
			continue
		}
		v := obj[name]
		sub := shape.object(name)
		if child, ok := v.(map[string]any); ok && (sub != nil || len(child) > 0) {
			t, g := leaves(child, sub, prefix+name+".", filled, false)
			total, got = total+t, got+g
			continue
		}
		if v == nil && sub != nil && len(sub.properties) > 0 {
			// A null object loses every leaf it declares.
			t, _ := leaves(nil, sub, prefix+name+".", filled, false)
			total += t
			continue
		}
		total++
		if v != nil {
			got++
			filled[prefix+name] = true
		}
	}
	return total, got
}

// objectShape is the part of a JSON schema the fill reads: an object's
// properties, each with its own shape when it is an object or a list of
// objects.
type objectShape struct {
	properties map[string]*objectShape // nil value: not an object
	order      []string
	lists      map[string]*objectShape // the item shape of a property that is a list of objects
}

func (s *objectShape) names() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.order)
}

func (s *objectShape) object(name string) *objectShape {
	if s == nil {
		return nil
	}
	return s.properties[name]
}

func (s *objectShape) items() (*objectShape, bool) {
	if s == nil {
		return nil, false
	}
	it, ok := s.lists[itemsField]
	return it, ok
}

// schemaNode is what declaredShape reads of a schema node.
type schemaNode struct {
	Type       any                    `json:"type"`
	Properties map[string]*schemaNode `json:"properties"`
	Items      *schemaNode            `json:"items"`
}

func (n *schemaNode) is(t string) bool {
	switch v := n.Type.(type) {
	case string:
		return v == t
	case []any:
		for _, x := range v {
			if x == t {
				return true
			}
		}
	}
	return false
}

// declaredShape is the data schema of key as an objectShape (nil when the
// operation has none).
func declaredShape(key string) *objectShape {
	raw, ok := schemas.For(key)
	if !ok {
		return nil
	}
	var root schemaNode
	if json.Unmarshal(raw, &root) != nil {
		return nil
	}
	return shapeOf(&root)
}

func shapeOf(n *schemaNode) *objectShape {
	s := &objectShape{properties: map[string]*objectShape{}, lists: map[string]*objectShape{}}
	for name := range n.Properties {
		s.order = append(s.order, name)
	}
	sort.Strings(s.order)
	for _, name := range s.order {
		p := n.Properties[name]
		switch {
		case p.is("object") && len(p.Properties) > 0:
			s.properties[name] = shapeOf(p)
		case p.is("array") && p.Items != nil && len(p.Items.Properties) > 0:
			s.properties[name] = nil
			s.lists[name] = shapeOf(p.Items)
		default:
			s.properties[name] = nil
		}
	}
	return s
}
