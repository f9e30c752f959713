package linkinbio_test

import (
	"bytes"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream/linkinbio"
)

// BenchmarkParseLargePage reads a page just under MaxPageBytes.
func BenchmarkParseLargePage(b *testing.B) {
	unit := []byte(`<div><a href="https://shop.example/item?utm_source=x">Item <b>bold</b></a></div>`)
	page := bytes.Repeat(unit, (linkinbio.MaxPageBytes-1)/len(unit))
	b.SetBytes(int64(len(page)))
	for b.Loop() {
		if _, err := linkinbio.Parse(linkinbio.Beacons, page, "https://beacons.ai/x"); err != nil {
			b.Fatal(err)
		}
	}
}
