package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// recording is -record DIR: the live routes' client, whose transport
// writes each source answer under DIR/<provider>/ as a replay fixture,
// every configured credential, cookie, session token and signing
// parameter removed first (replay.Recorder).
type recording struct {
	dir      string
	recorder *replay.Recorder
	client   *http.Client
}

// startRecording builds the client the runner uses in -record mode. The
// secrets removed are every provider's configured values, read through
// the same lookup the runner reads them with.
func startRecording(dir string, lookup func(string) (string, bool)) *recording {
	client := upstream.NewAPIClient()
	rec := replay.NewRecorder(dir, configuredSecrets(lookup), client.Transport)
	client.Transport = rec
	return &recording{dir: dir, recorder: rec, client: client}
}

// configuredSecrets are the values of every shipped provider's secrets
// that are set.
func configuredSecrets(lookup func(string) (string, bool)) []string {
	var values []string
	for _, p := range adapters.All() {
		for _, s := range p.Secrets {
			if v, ok := lookup(s.Name); ok && v != "" {
				values = append(values, v)
			}
		}
	}
	return values
}

// report says where the fixtures went (never what they hold) and how to
// review them; false when an answer could not be recorded.
func (r *recording) report(w io.Writer) bool {
	written := r.recorder.Written()
	fmt.Fprintf(w, "canary: recorded %d source answers under %s\n", len(written), r.dir)
	for _, f := range written {
		rel, err := filepath.Rel(r.dir, f.Path)
		if err != nil {
			rel = f.Path
		}
		note := ""
		if f.Status < 200 || f.Status > 299 {
			note = " (not a success: review before keeping it)"
		}
		fmt.Fprintf(w, "canary:   %s  HTTP %d%s\n", rel, f.Status, note)
	}
	if len(written) > 0 {
		fmt.Fprintf(w, "canary: review with: git status %s && git diff %s\n", r.dir, r.dir)
	}
	if err := r.recorder.Err(); err != nil {
		fmt.Fprintf(w, "canary: some answers were not recorded: %v\n", err)
		return false
	}
	return true
}
