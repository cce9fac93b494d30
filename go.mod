module github.com/pacer-go/pacer

go 1.25.0

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/jarcoal/httpmock v1.4.2
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
