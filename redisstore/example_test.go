package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/redisstore"
	"github.com/pacer-go/pacer/store"
)

// Every process whose Transport uses the same Redis (and prefix) paces each
// endpoint against one shared quota: run this in every replica.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	shared := redisstore.New(rdb, redisstore.WithPrefix("myapp:pacer:"))
	defer shared.Close() // returns leased tokens nobody used

	client := &http.Client{Transport: pacer.NewTransport(nil, pacer.WithStore(shared))}
	resp, err := client.Get("https://api.example.com/v1/items")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
}

// On a Redis Cluster, each endpoint's bucket lives on the master that owns
// its key's slot; when a master fails, only the endpoints on it fall back
// (or are refused, with FailClosed), and the others keep sharing their quota.
// The prefix has no {…} hash tag: one would put every key on one master.
func ExampleNew_cluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
	})
	defer rdb.Close()
	shared := redisstore.New(rdb, redisstore.WithPrefix("myapp:pacer:"),
		redisstore.WithFailureMode(redisstore.FailClosed))
	defer shared.Close()

	client := &http.Client{Transport: pacer.NewTransport(nil, pacer.WithStore(shared))}
	resp, err := client.Get("https://api.example.com/v1/items")
	var se *redisstore.ShardError
	if errors.As(err, &se) && errors.Is(se, redisstore.ErrRefused) {
		fmt.Println("the master of this endpoint's slot is down:", se.Shard)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
}

// A Store can also be used directly: Reserve books tokens in a shared bucket
// and says when they may be used.
func ExampleStore_Reserve() {
	shared := redisstore.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	defer shared.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := shared.Reserve(ctx, "https://api.example.com", store.Request{Tokens: 1, Limit: 2, Burst: 1})
	if err != nil || !g.OK {
		fmt.Println("not now:", err)
		return
	}
	time.Sleep(g.Delay) // then send the request
}
