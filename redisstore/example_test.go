package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/redisstore"
)

// Every process that uses the same Redis (and prefix) books from the same
// buckets. Here one process books from a bucket of 2 requests per second; a
// second process doing the same would see its first token 500 ms later.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	store := redisstore.New(rdb, redisstore.WithPrefix("myapp:pacer:"))
	defer store.Close() // returns leased tokens nobody used

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := store.Reserve(ctx, "https://api.example.com", pacer.StoreRequest{Tokens: 1, Limit: 2, Burst: 1})
	if err != nil {
		fmt.Println("no reservation:", err)
		return
	}
	time.Sleep(g.Delay) // then send the request
}
