# banlieue-console — two commands do everything:
#   make run    build and serve the console on http://127.0.0.1:3000 (SQLite under ./data)
#   make test   everything CI runs: format, lints, unit/integration tests on SQLite and
#               PostgreSQL, and the browser suite in Chromium
# Both install what is missing first (scripts/install-tools).

.PHONY: run test tools bench bench-issuer bench-ui fuzz fuzz-smoke

# With no KUBECONFIG / BANLIEUE_KUBECONFIG, the console starts its dev cluster (the
# Kubernetes emulator with the chart and a demo pool) inside the same process.
run: tools
	install -d -m 700 data
	BANLIEUE_DEV_CLUSTER=true cargo leptos serve $(if $(RELEASE),--release --precompress)

test: tools
	scripts/test

tools:
	scripts/install-tools

# Coverage-guided fuzzing (fuzz/, cargo-fuzz + libFuzzer on the stable toolchain): builds
# every target, then runs each for FUZZ_SECONDS (default one hour) in turn. fuzz-smoke is
# the short run `make test` does. See README, "Fuzzing".
FUZZ_SECONDS ?= 3600
fuzz: tools
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz

fuzz-smoke: tools
	FUZZ_SECONDS=20 scripts/fuzz

# The server's criterion benches by name: its issuer bench needs Node and PostgreSQL,
# which bench-issuer provides.
bench: tools
	cargo bench -p server --bench sign_in --bench users_page --bench dashboard --bench live_update --bench api_claim
	cargo bench -p kube-emulator --bench perf
	cargo bench -p banlieue-cluster --bench bind
	cargo bench -p banlieue-tenants --bench verify
	$(MAKE) --no-print-directory bench-issuer

# Our issuer's refresh grant side by side with npm oidc-provider (issue 17), on SQLite and
# on a PostgreSQL of its own that runs with fsync on (stopped on exit). QUICK=1 tries it
# with short windows.
BENCH_PG := BANLIEUE_PG_DIR=/tmp/banlieue-bench-pg BANLIEUE_PG_PORT=55433 BANLIEUE_PG_FSYNC=on
bench-issuer: tools
	[ -d bench/issuer/node_modules ] || (cd bench/issuer && npm ci --no-audit --no-fund)
	url=$$($(BENCH_PG) scripts/postgres-for-tests) && \
	trap '$(BENCH_PG) scripts/postgres-for-tests stop' EXIT && \
	BANLIEUE_BENCH_POSTGRES_URL=$$url cargo bench -p server --bench issuer $(if $(QUICK),-- --quick)

# The delivery benchmark (issue 18): the first visit to the dashboard over an emulated
# 1.6 Mbit/s, 150 ms link, the site's files uncompressed and precompressed side by side
# (end2end/bench/). On a release build with brotli and gzip copies, in a site of its own
# so the browser suite's debug site stays. BENCH_ROUNDS (default 5) per way.
BENCH_SITE := $(CURDIR)/target/bench-site
bench-ui: tools
	LEPTOS_SITE_ROOT=$(BENCH_SITE) cargo leptos build --release --precompress
	cd end2end && BANLIEUE_BIN=$${CARGO_TARGET_DIR:-$(CURDIR)/target}/release/banlieue-console \
	  BANLIEUE_E2E_SITE_ROOT=$(BENCH_SITE) npx playwright test -c bench/playwright.config.ts
