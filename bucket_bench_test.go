package pacer

import (
	"context"
	"testing"
	"time"
)

// The bucket's speed goals live here, not in timed tests. The comparison
// with golang.org/x/time/rate and go.uber.org/ratelimit is in the bench/
// module (see bench/README.md).

// notBinding is a bucket that always has tokens at the speed a benchmark
// can ask: every call takes the full fast path (clock read, CAS). The
// burst is a second of tokens so that a goroutine preempted between its
// clock read and its CAS is still granted.
func notBinding() *Bucket { return NewBucket(1e9, 1e9) }

func BenchmarkBucketAllow(b *testing.B) {
	bk := notBinding()
	b.ReportAllocs()
	for b.Loop() {
		if !bk.Allow() {
			b.Fatal("denied")
		}
	}
}

func BenchmarkBucketAllowParallel(b *testing.B) {
	bk := notBinding()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !bk.Allow() {
				b.Fatal("denied")
			}
		}
	})
}

// BenchmarkBucketAllowDenied is the other common case: an exhausted bucket
// answering no (loads only, no write).
func BenchmarkBucketAllowDenied(b *testing.B) {
	bk := NewBucket(Every(time.Hour), 1)
	bk.Allow()
	b.ReportAllocs()
	for b.Loop() {
		if bk.Allow() {
			b.Fatal("allowed")
		}
	}
}

func BenchmarkBucketAllowInf(b *testing.B) {
	bk := NewBucket(Inf, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bk.Allow()
		}
	})
}

func BenchmarkBucketWait(b *testing.B) {
	bk := notBinding()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := bk.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBucketWaitParallel(b *testing.B) {
	bk := notBinding()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := bk.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkBucketReserve(b *testing.B) {
	bk := notBinding()
	b.ReportAllocs()
	for b.Loop() {
		if !bk.Reserve().OK() {
			b.Fatal("not OK")
		}
	}
}
