package tiers

import "io/fs"

func fsErrNotExist() error { return fs.ErrNotExist }
