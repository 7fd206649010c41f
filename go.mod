module github.com/mcp-resume/mcp-resume

go 1.26.8

require (
	github.com/rs/zerolog v1.35.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	golang.org/x/sys v0.29.0 // indirect
)
