//go:build !race

package pacer

// manyKeys is how many distinct keys TestManyDistinctKeysStayWithinMemoryBound
// touches (see endpoint_race_test.go).
const manyKeys = 100_000
