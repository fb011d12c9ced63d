# agent-launcher. Quick start on a fresh Debian machine: `make demo`, `make test`.

GO        ?= go
BIN       := bin/agent-launcher
FUZZTIME  ?= 30s
# The Landlock ABI this machine's kernel must have: the kernel suites fail,
# rather than skip, on a kernel without it. Linux 6.18 here: ABI 7.
EXPECT_LANDLOCK_ABI ?= 7
# staticcheck 2026.2.2
STATICCHECK_VERSION := v0.8.2

.PHONY: all build test test-host vm-test vm-test-catches demo bench fuzz lint deps clean

all: build

deps:
	@./scripts/deps

# The packages whose own goroutines share state (the planner's recorder and
# its questions asked in parallel, the matcher's lazy tables, the supervisor,
# the CLI's caches and review walk), run again under the race detector
# (about 2.5 minutes here); the kernel suites drive the launcher's binary,
# which these cover.
RACE_PKGS := ./rules ./tiers ./landlock ./internal/wire ./internal/cli ./internal/launch

# With cgo (the init stage, internal/launch/initstage.c, runs before the Go
# runtime) and linked statically (scripts/build-launcher says why).
build:
	GO=$(GO) ./scripts/build-launcher $(BIN)

# Unit, table, golden and static-corpus fuzz tests (the fuzz targets run
# their checked-in corpora as ordinary tests), the purity check of the
# importable packages, the packages listed in RACE_PKGS again under the race
# detector, every test binary again as an unprivileged user, the demo (its
# output discarded) so that the README's first command works, and the kernel
# suites in VMs across Landlock ABIs (vm-test).
test: test-host vm-test

test-host: deps build
	./scripts/test-user
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./rules ./tiers ./landlock
	AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI=$(EXPECT_LANDLOCK_ABI) $(GO) test -count=1 ./...
	AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI=$(EXPECT_LANDLOCK_ABI) $(GO) test -race -count=1 $(RACE_PKGS)
	AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI=$(EXPECT_LANDLOCK_ABI) ./scripts/test-unprivileged
	@./scripts/demo $(BIN) > /dev/null 2>&1 && echo "ok   make demo (smoke test)" || { ./scripts/demo $(BIN); echo "FAIL make demo"; exit 1; }

# The kernel suites in VMs, one row per kernel of vm-tests/rows (Landlock
# absent, disabled, ABI 2, 6 and the newest), as root and as an
# unprivileged user in each guest; a table of the rows. vm-tests/README.md.
vm-test: deps
	./vm-tests/matrix.sh

# Proves that the matrix catches a broken floor: a copy of the tree whose
# planner grants carved directories what their carve-outs must not get
# fails in every row with Landlock (vm-tests/catches.sh).
vm-test-catches: deps
	./vm-tests/catches.sh

demo: deps build
	@./scripts/demo $(BIN)

# The in-process micro-benchmarks (the decision engine; listing, holding and
# planning a 10,000-file workspace; loading the default policy; the review's
# walk), then the Landlock floor beside minimal C references of the same arms
# (bench/floor.c), in one run: start-up, open(), whole workloads. Needs gcc,
# git and tar.
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./tiers ./landlock ./internal/cli
	$(GO) run ./bench/cmd/floorbench -launcher $(BIN)

# Each fuzz target for FUZZTIME (go test -fuzz takes one target at a time).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzGlobDifferential$$' -fuzztime $(FUZZTIME) ./tiers
	$(GO) test -run '^$$' -fuzz '^FuzzDecide$$' -fuzztime $(FUZZTIME) ./tiers
	$(GO) test -run '^$$' -fuzz '^FuzzRulesBelow$$' -fuzztime $(FUZZTIME) ./tiers
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./rules
	$(GO) test -run '^$$' -fuzz '^FuzzSubtree$$' -fuzztime $(FUZZTIME) ./tiers
	$(GO) test -run '^$$' -fuzz '^FuzzAnchored$$' -fuzztime $(FUZZTIME) ./tiers
	$(GO) test -run '^$$' -fuzz '^FuzzPlan$$' -fuzztime $(FUZZTIME) ./landlock
	$(GO) test -run '^$$' -fuzz '^FuzzPlanReplay$$' -fuzztime $(FUZZTIME) ./landlock
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeConfig$$' -fuzztime $(FUZZTIME) ./internal/launch
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./internal/wire

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

clean:
	rm -rf bin
