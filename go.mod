module github.com/agent-launcher/agent-launcher

go 1.26.0

require (
	github.com/bmatcuk/doublestar/v4 v4.10.4
	github.com/pelletier/go-toml/v2 v2.4.3
	golang.org/x/sys v0.49.0
)

require (
	github.com/landlock-lsm/go-landlock v0.11.0
	kernel.org/pub/linux/libs/security/libcap/psx v1.2.77 // indirect
)
