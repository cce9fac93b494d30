// Package redisstore is a [store.Store] on Redis: processes that use one
// Redis, or one Redis Cluster (and one key prefix), share their rate-limit
// buckets, learned limits and Retry-After pauses, so N replicas calling one
// API with one key pace against one quota instead of overshooting it N-fold.
//
// Each reservation is one Lua script run (GCRA, atomic, on the Redis clock;
// loaded once and called by its SHA). At high rates a process books a lease
// of several tokens per round trip and hands them out locally, sized to about
// [DefaultLeaseWindow] of its own traffic, which cuts Redis calls by that
// factor; leased tokens are real bookings, so the shared limit holds exactly,
// and those left unused by the end of the lease go back to the bucket. Keys
// expire once idle.
//
// # Fleet budgets
//
// The Store is also a [store.Budgeter]: it keeps each quota's fleet budget,
// the lowest Remaining its members have seen in the window less what each
// member holds (units leased to it, requests in flight), and changes it with
// one script call per lease. Transports that share a Store spend a quota as
// one client does: any of them at once while the budget affords the work,
// none what another took. Measured as four OS processes on one Redis, worst
// of 24 runs on a loaded two-core machine (18 under the race detector): a
// job of 400 requests within a 5,000-an-hour quota took 1.06× the time of
// the same processes without pacer, with no 429; saturating a 60-a-second
// quota, no 429 after each process's first response, and every window spent
// to 0.993 of it at least.
//
// # Key layout and Redis Cluster
//
// Each store key (an endpoint) is one Redis hash, named prefix + key
// ([WithPrefix]), and each quota's fleet budget one more, named prefix + key
// + "\x00budget\x00" + the quota's name. Every script call touches one key,
// so the store works unchanged on a *redis.ClusterClient: a key's hash slot,
// and so its master, comes from its whole name, and endpoints spread over the
// masters (an endpoint's budget may live on another master than its bucket).
// Keep braces out of the prefix: when a name has a {…} hash tag, Redis
// computes the slot from the tag alone, so a prefix such as "{pacer}:" puts
// every key on one slot, hence one master, which then carries all the load
// and takes every key down with it. (Keys that contain braces themselves,
// such as URL templates, group by the braced text the same way.)
//
// # Failures
//
// The store tracks the health of each shard: the master that owns a key's
// slot, or the one Redis of a plain client. While a shard is unreachable, the
// keys on it either fall back to a local limiter per process ([FailOpen], the
// default: it warns once per outage and switches back by itself when the
// shard answers again) or are refused with a *pacer.RateLimitError wrapping
// a *[ShardError] ([FailClosed]); keys on the other masters keep using Redis.
// A master that refuses connections is noticed within milliseconds, one that
// stalls after [WithTimeout]. Probes ask the failed master itself, with a
// keyed command ([WithProbeInterval]). No call blocks longer than its
// context: each Redis call also has its own timeout.
//
// A member cut off from the master of a budget spends, until the window's
// reset, what it had leased and its share of the budget the store last told
// it; past the reset, what its own responses show. On a cluster with
// replicas, a master killed a third into a job of 450 requests on 300 a
// window (four Transports of four workers, each with its own Store; 50 ms
// answers; worst of 17 runs):
// no call failed or reached its context, at most two 429s (the members' shares
// of budgets told at slightly different moments overlap), the stores used
// Redis again through the replica 3.5-5.5 s later, and the job took no
// longer than without the kill; under [FailClosed] the 16 requests then in
// flight were refused until the stores' probes found the replica.
//
// On a cluster, a replica that takes over a failed master brings its keys
// back to Redis within moments. With Redis's default
// cluster-require-full-coverage yes, though, the whole cluster refuses keyed
// commands (CLUSTERDOWN, [ErrClusterDown]) once it has marked a master
// failed (after cluster-node-timeout), so every key falls back until the
// master is back or replaced; set cluster-require-full-coverage no to keep
// the other masters serving. While a slot moves between masters the client
// follows the MOVED and ASK redirections, and each bucket moves with its key.
//
// Usage, with the Transport sharing every endpoint's quota:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	// or: rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}})
//	shared := redisstore.New(rdb)
//	defer shared.Close()
//	client := &http.Client{Transport: pacer.NewTransport(nil, pacer.WithStore(shared))}
package redisstore
