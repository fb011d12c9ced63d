module github.com/agent-launcher/agent-launcher

go 1.26.0

require (
	github.com/bmatcuk/doublestar/v4 v4.10.4 // indirect
	github.com/landlock-lsm/go-landlock v0.11.0 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
