// Package app wires the pipeline from the environment for the Lambda
// functions and the local server, so that every main stays one line.
package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/gateway"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
)

// Environment variables read here (README, "Configuration").
const (
	EnvAddr      = "MERIDIAN_ADDR"       // local server listen address
	EnvErrorsURL = "MERIDIAN_ERRORS_URL" // errors reference that doc_url anchors into
	EnvLogLevel  = "MERIDIAN_LOG_LEVEL"  // debug, info (default), warn, error
)

// DefaultAddr is where make run listens.
const DefaultAddr = "127.0.0.1:8080"

// Logger writes one JSON object per line to stdout (CloudWatch in Lambda).
func Logger() *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(os.Getenv(EnvLogLevel)))
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level}))
}

// Config is the pipeline configuration for one family ("" for all).
func Config(family registry.Family, logger *slog.Logger) pipeline.Config {
	return pipeline.Config{
		Registry:  registry.Default(),
		Family:    family,
		Keys:      auth.NoKeys{}, // the key store arrives with accounts; until then no key is valid
		ErrorsURL: os.Getenv(EnvErrorsURL),
		Logger:    logger,
	}
}

// Function is the Lambda handler of one family.
func Function(family registry.Family, logger *slog.Logger) gateway.EventHandler {
	cfg := Config(family, logger)
	return gateway.Lambda(pipeline.New(cfg), logger, cfg.ErrorsURL)
}

// StartLambda runs the family's function in the Lambda runtime.
func StartLambda(family registry.Family) {
	lambda.Start(Function(family, Logger()))
}

// LocalHandler serves every family in one process through the same event
// adaptation Lambda uses.
func LocalHandler(logger *slog.Logger) http.Handler {
	functions := map[registry.Family]gateway.EventHandler{}
	for _, f := range registry.Families {
		functions[f] = Function(f, logger)
	}
	return gateway.Local(registry.Default().Routes(), functions, logger, os.Getenv(EnvErrorsURL))
}

// ListenAndServe runs the local server on addr until ctx ends.
func ListenAndServe(ctx context.Context, addr string, logger *slog.Logger, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           LocalHandler(logger),
		ReadHeaderTimeout: 10 * time.Second,
		// Above the pipeline's own query cap, so an oversized query gets
		// the typed 400 rather than net/http's plain-text 431.
		MaxHeaderBytes: 4 << 20,
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			return err
		}
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// RunLocal is the local server's main: MERIDIAN_ADDR or 127.0.0.1:8080,
// stopped by SIGINT or SIGTERM.
func RunLocal() {
	logger := Logger()
	addr := strings.TrimSpace(os.Getenv(EnvAddr))
	if addr == "" {
		addr = DefaultAddr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := ListenAndServe(ctx, addr, logger, func(a net.Addr) {
		logger.Info("meridian listening", "addr", "http://"+a.String(), "try", "curl -i http://"+a.String()+"/v1")
	})
	if err != nil {
		logger.Error("local server stopped", "error", err.Error())
		os.Exit(1)
	}
}
