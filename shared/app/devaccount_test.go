package app_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
)

// make run on an empty data dir creates the development account and shows
// its console token and first key once; a restart keeps them and shows nothing.
func TestDevelopmentAccountIsCreatedOnce(t *testing.T) {
	dir := t.TempDir()
	var banner bytes.Buffer
	s, err := app.OpenLocalStore(context.Background(), dir, "127.0.0.1:8080", &banner)
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`API key\s+(mn_[A-Za-z0-9_-]{43})`).FindStringSubmatch(banner.String())
	token := regexp.MustCompile(`console token\s+(mc_[A-Za-z0-9_-]{43})`).FindStringSubmatch(banner.String())
	if key == nil || token == nil {
		t.Fatalf("banner: %s", banner.String())
	}
	logs := &bytes.Buffer{}
	h := app.LocalHandler(slog.New(slog.NewJSONHandler(logs, nil)), app.Deps{Store: s})
	get := func(path, header, value string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "http://127.0.0.1:8080"+path, nil)
		req.Header.Set(header, value)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := get("/v1/credits/balance", "x-api-key", key[1]); rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"credits_remaining":1000`)) {
		t.Fatalf("the printed key: %d %s", rec.Code, rec.Body)
	}
	if rec := get("/console/overview", "authorization", "Bearer "+token[1]); rec.Code != http.StatusOK {
		t.Fatalf("the printed console token: %d %s", rec.Code, rec.Body)
	}
	if bytes.Contains(logs.Bytes(), []byte(key[1][3:])) || bytes.Contains(logs.Bytes(), []byte(token[1][3:])) {
		t.Error("logs contain the key or token")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	banner.Reset()
	s, err = app.OpenLocalStore(context.Background(), dir, "127.0.0.1:8080", &banner)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if banner.Len() != 0 {
		t.Errorf("a restart shows nothing again: %s", banner.String())
	}
	h = app.LocalHandler(slog.New(slog.NewJSONHandler(io.Discard, nil)), app.Deps{Store: s})
	if rec := get("/v1/credits/balance", "x-api-key", key[1]); rec.Code != http.StatusOK {
		t.Errorf("the key survives a restart: %d", rec.Code)
	}
}
