module github.com/pacer-go/pacer/bench

go 1.25.0

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/pacer-go/pacer v0.0.0
	go.uber.org/ratelimit v0.3.1
	golang.org/x/time v0.15.0
)

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
)

replace github.com/pacer-go/pacer => ..
