# kvs — build, test and benchmark. Every target works on a fresh machine with Go.
GO          ?= go
BENCH_COUNT ?= 6
BENCH_TIME  ?= 60
BENCH_MODE  ?= memory

.PHONY: build test test-short race vet fmt bench movebench rebalancebench fuzz compare memory clean

build:
	@mkdir -p dist
	$(GO) build -o dist/kvs ./cmd/kvs

# The whole suite: unit tests (with the race detector for the packages whose
# concurrency matters most) and the end-to-end tests in test/, which build and
# run the real binary. Differential tests run where redis-server is installed.
# The server's tests run twice: with memory mode's event loops (the default)
# and with a goroutine per connection (durable and cluster mode's way).
test: vet
	$(GO) test -race -count=1 ./resp/ ./lua/ ./fsm/ ./wal/ ./server/ ./cluster/... ./group/ ./config/ ./acl/ ./cmdspec/ ./cmd/... ./bench/ ./backup/ ./rdb/ ./test/powercut/
	KVS_TEST_CONN_GOROUTINES=1 $(GO) test -race -count=1 ./server/
	$(GO) test -count=1 -timeout 15m ./test/

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

# Go benchmarks, medians over BENCH_COUNT runs are what docs/performance-notes.md quotes.
# The end-to-end benchmarks in test/ start real processes (clusters among
# them) for each run, so they run a fixed number of ops, BENCH_E2E_OPS.
BENCH_E2E_OPS ?= 20000
bench:
	@mkdir -p dist
	$(GO) test -run '^$$' -bench . -benchmem -count=$(BENCH_COUNT) ./fsm/ ./wal/ ./server/ ./group/ ./cmd/kvs/ ./bench/ | tee dist/bench.txt
	$(GO) test -run '^$$' -bench . -benchmem -count=$(BENCH_COUNT) -benchtime 3s ./cluster/ | tee -a dist/bench.txt
	$(GO) test -run '^$$' -bench . -skip 'SlotMove|Rebalance' -count=$(BENCH_COUNT) -benchtime $(BENCH_E2E_OPS)x ./test/ | tee -a dist/bench.txt

# A move of slots and what it costs the clients (BenchmarkSlotMove): three
# nodes, three groups, MOVE_BYTES of data in slots 0-5460 moved to group 2
# once idle and once under the mix on the other slots, at MOVE_RATE
# (slot-move-rate, 4mb unless given). PERFORMANCE.md quotes it.
MOVE_BYTES ?= 1gb
MOVE_RATE ?= 4mb
movebench: build
	$(GO) test ./test/ -v -run '^$$' -bench SlotMove -benchtime 1x -timeout 60m -args -kvs.bin=$(CURDIR)/dist/kvs -movebench.bytes=$(MOVE_BYTES) -movebench.rate=$(MOVE_RATE)

# How long `kvs rebalance --wait` takes after `kvs groups add`, and what it
# costs the clients (BenchmarkRebalance): three nodes, three groups holding
# MOVE_BYTES over all slots, a fourth group added and given its share at
# MOVE_RATE, once idle and once under the mix on the slots that stay (-v:
# its log is longer than the 10 lines go test keeps of a benchmark's).
rebalancebench: build
	$(GO) test ./test/ -v -run '^$$' -bench '^BenchmarkRebalance$$' -benchtime 1x -timeout 60m -args -kvs.bin=$(CURDIR)/dist/kvs -movebench.bytes=$(MOVE_BYTES) -movebench.rate=$(MOVE_RATE)

# Run every fuzz target of every package for FUZZ_TIME each (their seed
# corpora also run in `make test`).
FUZZ_TIME ?= 30s
fuzz:
	@for pkg in ./fsm/ ./wal/ ./server/ ./rdb/; do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep ^Fuzz); do \
			echo "== $$pkg $$t"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZ_TIME) $$pkg || exit 1; \
		done; \
	done

# The reference performance page's workload against one mode (BENCH_MODE=
# memory, durable or cluster) for BENCH_TIME seconds, with memtier_benchmark
# if installed and kvs bench otherwise; the JSON lands in
# dist/memtier-$(BENCH_MODE).json. KVS_BENCH_PORT moves it off 16379.
# A cluster's write throughput as nodes and groups are added, each node
# capped by a cgroup CPU quota (test/scale.sh: SCALE_CONFIGS, SCALE_QUOTA,
# ...). Needs root and redis-tools.
.PHONY: scale
scale: build
	bash test/scale.sh

.PHONY: memtier
memtier: build
	BENCH_MODE=$(BENCH_MODE) BENCH_TIME=$(BENCH_TIME) bash test/memtier.sh

# Side-by-side with redis-server (and valkey-server where installed: VALKEY
# or PATH), client pinned to one core and servers to
# the other: redis-benchmark SET/GET at -P 1 and 16, the memtier workload in
# every mode (BENCH_TIME seconds each, 20 unless given), and valkey's
# SET/GET/INCR by value size and pipeline. ROUNDS, MODES and TABLES narrow
# it; see the script's header.
compare: build
	bash test/compare-redis.sh

# Memory beside redis-server: the RSS each adds holding 1M 10-field hashes,
# one 1M-field hash, one 1M-member sorted set, one 1M-element list and 1M
# strings (N and DATASETS narrow it). dist/memory.md gets the table.
.PHONY: memory
memory: build
	bash test/memory-compare.sh

# The chaos tests alone: a seeded schedule of kills, pauses, restarts,
# raft network faults (a node deaf, slow or flapping; the leader isolated,
# a follower split off, a bridge, one-way cuts, a flapping link) and a node
# removed, wiped and joined again, against a three-node cluster for
# CHAOS_TIME (10m unless given; `make test` runs 20 s and 15 s). TestChaos
# runs it with --reads linearizable and checks every history with
# porcupine; TestChaosStale with stale reads and the stale-read checker.
# CHAOS_READS=linearizable or stale runs one of them; both run side by side
# by default. CHAOS_TLS=1 runs TestChaosTLS instead: the linearizable
# schedule against a cluster with mutual TLS between its nodes
# (--tls-cluster yes; `make test` runs it for 10 s). CHAOS_GROUPS=N runs
# TestChaosGroups instead: the linearizable schedule against three nodes
# whose slots are spread over N Raft groups (--groups N), the faults on
# the leader hitting a group's leader drawn at random (`make test` runs 3
# groups for 15 s). CHAOS_SEED=N replays the schedule of a run whose log
# printed seed N.
CHAOS_TIME    ?= 10m
CHAOS_SEED    ?=
CHAOS_READS   ?= both
CHAOS_TIMEOUT ?= 60m
CHAOS_TLS     ?=
CHAOS_GROUPS  ?=
chaos_run_both         = ^TestChaos(Stale)?$$
chaos_run_linearizable = ^TestChaos$$
chaos_run_stale        = ^TestChaosStale$$
.PHONY: chaos
chaos:
	$(GO) test ./test/ -run '$(if $(CHAOS_GROUPS),^TestChaosGroups$$,$(if $(CHAOS_TLS),^TestChaosTLS$$,$(chaos_run_$(CHAOS_READS))))' -count=1 -v -timeout $(CHAOS_TIMEOUT) -args -chaos.time=$(CHAOS_TIME) -chaos.stale-time=$(CHAOS_TIME) -chaos.tls-time=$(CHAOS_TIME) -chaos.groups-time=$(CHAOS_TIME)$(if $(CHAOS_GROUPS), -chaos.groups=$(CHAOS_GROUPS))$(if $(CHAOS_SEED), -seed=$(CHAOS_SEED))

clean:
	rm -rf dist

# Redis 7.0.15's own Tcl test suite in external mode against kvs (memory
# mode; SUITE_MODE=durable for the append log), a fresh server per unit,
# with the tests test/redis-suite.skip lists left out. SUITE_SERVER=redis
# runs the same units against redis-server; SUITE_UNITS narrows the run.
# The suite comes from Debian's redis source package (see .ci/run).
.PHONY: redis-suite
redis-suite: build
	bash test/redis-suite.sh
