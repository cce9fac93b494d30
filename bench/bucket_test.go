package bench

import "testing"

// BenchmarkBucket runs every workload as Scenario/Lib, for example
//
//	go test -run '^$' -bench 'Bucket/Allow' -count 10 . | benchstat -
func BenchmarkBucket(b *testing.B) {
	for _, w := range Workloads() {
		b.Run(w.Name(), w.Fn)
	}
}
