package redistest

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// A server that exits at start (here: its port is taken) is reported, and
// start returns to try another port. It hung instead, waiting for an exit
// that waitReady had already taken, until the test binary timed out
// (TestClusterUnreachableAtStart, 1 run in 3 on a loaded machine).
func TestStartReportsAServerThatExitsAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	s := &Server{t: t, binary: Binary(t), dir: t.TempDir(), port: port,
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	done := make(chan error, 1)
	go func() { done <- s.start() }()
	select {
	case err := <-done:
		if err == nil {
			s.Kill()
			t.Fatal("a server on a taken port started")
		}
		t.Logf("reported: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("start did not return within 30 s of a server that could not bind")
	}
}
