module github.com/agent-launcher/agent-launcher

go 1.26

require (
	github.com/bmatcuk/doublestar/v4 v4.10.4 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
)
