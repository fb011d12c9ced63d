// Package kerneltest holds the kernel-level integration tests of the
// launcher: real Landlock, real processes, the real `agent-launcher run`
// binary confining the test agent (internal/testagent), each run in its own
// process with a hard timeout. It has no non-test code.
//
// The suites need the kernel the run declares: with
// AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI set, a kernel with another Landlock ABI
// fails every test instead of skipping. AGENT_LAUNCHER_TEST_BIN_DIR names a
// directory with prebuilt agent-launcher and testagent binaries (the
// unprivileged and VM runs); otherwise TestMain builds them.
package kerneltest
