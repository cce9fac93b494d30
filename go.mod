module github.com/pacer-go/pacer

go 1.25.0

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/hashicorp/go-retryablehttp v0.7.8 // indirect
	github.com/jarcoal/httpmock v1.4.2 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
