//go:build !linux || !cgo

package launch

// hasInitStage says whether this build has the init stage (initstage.c,
// which needs cgo): a build with CGO_ENABLED=0 has none, and run refuses.
const hasInitStage = false
