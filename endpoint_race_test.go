//go:build race

package pacer

// The race detector keeps bookkeeping per synchronisation object: touching
// 100 000 limiters costs it tens of seconds. Under -race the memory test
// touches fewer keys, still three times the default cap.
const manyKeys = 30_000
