// Package redistest runs throwaway redis-server processes for tests: each on
// a free loopback port, without persistence, killed when the test ends.
//
// A missing redis-server (or redis-cli, for a cluster) skips the test,
// except in CI (CI=true), where it fails it: CI must install them (.ci/run
// does; Debian's redis-server package brings redis-cli along). Set
// REDIS_SERVER and REDIS_CLI to use binaries outside PATH.
package redistest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server child process.
type Server struct {
	// Addr is host:port of the server; it stays the same across Restart.
	Addr string

	t      testing.TB
	binary string
	port   int
	args   []string // extra redis-server arguments
	dir    string   // working directory, kept across Restart (a cluster node's nodes.conf lives here)

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd is reaped
}

// Binary returns the redis-server to run, skipping (or, in CI, failing) t
// when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	return lookPath(t, "REDIS_SERVER", "redis-server")
}

// lookPath finds a Redis program (named by env, or def), skipping t when it
// is missing, or failing it in CI.
func lookPath(t testing.TB, env, def string) string {
	t.Helper()
	name := os.Getenv(env)
	if name == "" {
		name = def
	}
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("%s not found (%v); install it with `apt-get install -y redis-server` "+
		"(or `make test`, which does) to run the Redis tests", name, err)
	if os.Getenv("CI") == "true" {
		t.Fatal("CI: " + msg)
	}
	t.Skip(msg)
	return ""
}

// Start starts a server on a free loopback port and stops it when the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil)
}

// start starts a server with extra arguments; args may hold "{bus}", which
// is replaced by a second free port (a cluster node's bus port).
func start(t testing.TB, args []string) *Server {
	t.Helper()
	s := &Server{t: t, binary: Binary(t), dir: t.TempDir()}
	var err error
	for range 5 { // a free port can be taken between probing and binding
		s.port = freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		s.args = make([]string, len(args))
		bus := strconv.Itoa(freePort(t))
		for i, a := range args {
			s.args[i] = strings.ReplaceAll(a, "{bus}", bus)
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start() error {
	out := new(bytes.Buffer)
	cmd := exec.Command(s.binary, append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--daemonize", "no", "--loglevel", "warning"}, s.args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.binary, err)
	}
	// Closed once the process is reaped, for every waiter: a channel
	// carrying Wait's error was drained by waitReady when the server
	// exited at start (its port, or its bus port, taken since it was
	// probed free), and the wait for it after Kill hung until the test
	// binary's 10-minute timeout.
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	if err := waitReady(s.Addr, exited, &waitErr); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s on %s: %w\n%s", s.binary, s.Addr, err, out)
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// waitReady polls until the server answers PING, it exits (exited is
// closed, and *waitErr says how), or 10 s pass. It speaks RESP on a raw
// connection: a client library would log every refused dial.
func waitReady(addr string, exited <-chan struct{}, waitErr *error) error {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if ping(addr) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within 10s")
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before answering PING: %v", *waitErr)
		case <-tick.C:
		}
	}
}

func ping(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := io.ReadFull(conn, buf)
	return string(buf[:n]) == "+PONG\r\n"
}

// Kill stops the server at once (SIGKILL), as a crash would. It is a no-op
// when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited // the port is free again once the process is gone
}

// Restart starts the server again on the same port, empty (a cluster node
// keeps its identity and slots: they are in its nodes.conf).
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// Freeze stops the server process (SIGSTOP): connections stay open and
// calls hang, as with a stalled server or a network partition. Thaw resumes
// it.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Client returns a client for the server that honours context deadlines and
// fails fast, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:                  s.Addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		MaxRetries:            -1,
		PoolSize:              32,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
