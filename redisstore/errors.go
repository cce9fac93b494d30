package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// What went wrong with a Redis call, for errors.Is on a *ShardError (in
// [FailClosed] mode, the Err of the *pacer.RateLimitError a refused
// reservation returns).
var (
	// ErrRefused: the master's host refused the connection (nothing listens:
	// the Redis process is down). The store notices it within milliseconds,
	// without waiting for the client's dial retries.
	ErrRefused = errors.New("connection refused")
	// ErrTimeout: Redis did not answer within [WithTimeout] (stalled, or
	// unreachable over the network).
	ErrTimeout = errors.New("no answer in time")
	// ErrClusterDown: the node answered CLUSTERDOWN. With Redis's default
	// cluster-require-full-coverage yes, every master says so once any master
	// is marked failed, until it is back or replaced.
	ErrClusterDown = errors.New("cluster down (CLUSTERDOWN)")
	// ErrRedirected: the key's slot is moving between masters (MOVED or ASK)
	// and the client gave up following it (ClusterOptions.MaxRedirects).
	// Only that reservation is affected: the master stays in use.
	ErrRedirected = errors.New("slot moving between masters (MOVED/ASK)")
)

// ShardError is a failed Redis call: which master, what happened, and the
// client's own error.
type ShardError struct {
	// Shard is the host:port of the master that owns the key's slot (of the
	// one Redis for a plain client); "" when a cluster client could not load
	// its slot map, or for a client with no one address (a Ring).
	Shard string
	// Kind is ErrRefused, ErrTimeout, ErrClusterDown or ErrRedirected; nil
	// for any other failure.
	Kind error
	// Err is the client's error. For a timeout it keeps the message but not
	// the identity of a context error: Redis was slow, the caller's own
	// deadline did not pass.
	Err error
}

func (e *ShardError) Error() string {
	var b strings.Builder
	b.WriteString("redisstore: Redis")
	if e.Shard != "" {
		b.WriteString(" ")
		b.WriteString(e.Shard)
	}
	b.WriteString(": ")
	switch {
	case e.Kind != nil && e.Err != nil:
		b.WriteString(e.Kind.Error() + " (" + e.Err.Error() + ")")
	case e.Kind != nil:
		b.WriteString(e.Kind.Error())
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Kind and Err, so errors.Is finds both.
func (e *ShardError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Kind, e.Err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// classify describes err, returned by a call to shard under ctx, as a
// *ShardError.
func classify(ctx context.Context, shard string, err error) error {
	if err == nil {
		return nil
	}
	var se *ShardError
	if errors.As(err, &se) {
		return err
	}
	e := &ShardError{Shard: shard, Err: err}
	var ne net.Error
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	switch {
	case moved || ask:
		e.Kind = ErrRedirected
	case redis.IsClusterDownError(err):
		e.Kind = ErrClusterDown
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Kind = ErrRefused
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		e.Kind = ErrTimeout
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			e.Err = errors.New(err.Error())
		}
	}
	return e
}
