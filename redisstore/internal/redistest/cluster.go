package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters (with or without a replica each),
// each node a Server on free loopback ports (client and bus), created with
// `redis-cli --cluster create`.
type Cluster struct {
	Nodes []*Server

	t        testing.TB
	replicas int // in all
}

// ClusterNodeTimeout is the cluster-node-timeout of the nodes: how long a
// master may stay silent before the others mark it failed. Redis's default,
// 15 s, would outlast the tests; 2 s is still well above the stalls of a
// loaded test machine, which would otherwise get masters marked failed.
const ClusterNodeTimeout = 2 * time.Second

// StartCluster starts masters nodes (at least 3, as redis-cli requires), joins them into one cluster with the
// slots split evenly, and waits until every node reports cluster_state:ok.
// args are extra redis-server arguments for every node. By default the nodes
// keep serving the slots they own while another master is down
// (cluster-require-full-coverage no); pass "--cluster-require-full-coverage",
// "yes" for Redis's default, where the whole cluster refuses keyed commands
// (CLUSTERDOWN) once a master is marked failed.
func StartCluster(t testing.TB, masters int, args ...string) *Cluster {
	t.Helper()
	return startCluster(t, masters, 0, args)
}

// StartClusterWithReplicas is StartCluster with one replica per master,
// which takes over when its master fails (ClusterNodeTimeout after the
// master stops answering, and a second or so of election).
func StartClusterWithReplicas(t testing.TB, masters int, args ...string) *Cluster {
	t.Helper()
	return startCluster(t, masters, 1, args)
}

func startCluster(t testing.TB, masters, replicas int, args []string) *Cluster {
	t.Helper()
	cli := lookPath(t, "REDIS_CLI", "redis-cli")
	c := &Cluster{t: t, replicas: masters * replicas}
	nodeArgs := append([]string{
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", "{bus}",
		"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout.Milliseconds())),
		"--cluster-require-full-coverage", "no",
	}, args...)
	create := []string{"--cluster", "create", "--cluster-replicas", strconv.Itoa(replicas)}
	for range masters * (1 + replicas) {
		s := start(t, nodeArgs)
		t.Cleanup(s.Kill)
		c.Nodes = append(c.Nodes, s)
		create = append(create, s.Addr)
	}
	// redis-cli waits for the nodes to agree with no end of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, append(create, "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s\nnodes:\n%s", err, out, c.Describe())
	}
	c.WaitOK()
	return c
}

// Addrs returns the nodes' addresses, for redis.ClusterOptions.Addrs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// Client returns a cluster client with go-redis's defaults (as an
// application would create it), closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Node returns the node at addr, nil if none.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// WaitOK waits until every node answers and reports cluster_state:ok, with
// all of them agreeing on who owns each slot and knowing every replica as
// one, and every replica in sync with its master; it fails the test after
// 20 s. (Replicas learn their role after the slots are assigned: a master
// killed before the others know its replica as one is not failed over.)
func (c *Cluster) WaitOK() {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var why string
	for time.Now().Before(deadline) {
		why = c.notOK()
		if why == "" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("redistest: cluster not ok within 20s: %s", why)
}

// notOK says why the cluster is not ok yet ("" when it is).
func (c *Cluster) notOK() string {
	var first string
	for _, s := range c.Nodes {
		info, err := s.do("CLUSTER", "INFO")
		if err != nil {
			return fmt.Sprintf("%s: %v", s.Addr, err)
		}
		if !strings.Contains(info.(string), "cluster_state:ok") {
			return s.Addr + ": cluster_state not ok"
		}
		slots, err := s.do("CLUSTER", "SLOTS")
		if err != nil {
			return fmt.Sprintf("%s: %v", s.Addr, err)
		}
		nodes, err := s.do("CLUSTER", "NODES")
		if err != nil {
			return fmt.Sprintf("%s: %v", s.Addr, err)
		}
		if n := countReplicas(nodes.(string)); n != c.replicas {
			return fmt.Sprintf("%s knows %d replicas of %d", s.Addr, n, c.replicas)
		}
		repl, err := s.do("INFO", "replication")
		if err != nil {
			return fmt.Sprintf("%s: %v", s.Addr, err)
		}
		if r := repl.(string); strings.Contains(r, "role:slave") && !strings.Contains(r, "master_link_status:up") {
			return s.Addr + ": replica not in sync"
		}
		view := fmt.Sprint(slots)
		if first == "" {
			first = view
		} else if view != first {
			return "nodes disagree on the slot map"
		}
	}
	return ""
}

// Describe returns each node's CLUSTER NODES, for a test's failure message.
func (c *Cluster) Describe() string {
	var views []string
	for _, s := range c.Nodes {
		v, err := s.do("CLUSTER", "NODES")
		views = append(views, fmt.Sprintf("%s: %v %v", s.Addr, v, err))
	}
	return strings.Join(views, "\n")
}

// countReplicas counts the replicas in a CLUSTER NODES answer: lines whose
// flags (the third field) say slave.
func countReplicas(nodes string) int {
	n := 0
	for line := range strings.Lines(nodes) {
		if f := strings.Fields(line); len(f) > 2 && slices.Contains(strings.Split(f[2], ","), "slave") {
			n++
		}
	}
	return n
}

// ID returns the node's cluster node ID.
func (s *Server) ID() string {
	s.t.Helper()
	id, err := s.do("CLUSTER", "MYID")
	if err != nil {
		s.t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr, err)
	}
	return id.(string)
}

// do runs one command on the server alone, without retries.
func (s *Server) do(args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, PoolSize: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

// MoveSlot moves slot from node from to node to while clients keep using it,
// as `redis-cli --cluster reshard` does: the slot is marked importing on to
// and migrating on from, its keys are moved a few at a time with MIGRATE
// (pausing step between batches, so that clients meet the ASK redirections
// of a slot half moved), and then every node is told its new owner. It
// returns how many keys were moved.
func (c *Cluster) MoveSlot(slot int, from, to *Server, step time.Duration) int {
	c.t.Helper()
	must := func(s *Server, args ...any) any {
		c.t.Helper()
		v, err := s.do(args...)
		if err != nil {
			c.t.Fatalf("redistest: %v on %s: %v", args, s.Addr, err)
		}
		return v
	}
	fromID, toID := from.ID(), to.ID()
	must(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	must(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	moved := 0
	for {
		time.Sleep(step)
		keys := must(from, "CLUSTER", "GETKEYSINSLOT", slot, 2).([]any)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS"}
		args = append(args, keys...)
		must(from, args...)
		moved += len(keys)
	}
	// The new owner first, then the old one, then the rest: the order
	// redis-cli uses, so that no node redirects to one that does not know yet.
	must(to, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	must(from, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	for _, s := range c.Nodes {
		if s != from && s != to {
			must(s, "CLUSTER", "SETSLOT", slot, "NODE", toID)
		}
	}
	return moved
}
