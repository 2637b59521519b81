# banlieue-console — two commands do everything:
#   make run    build and serve the console on http://127.0.0.1:3000 (SQLite under ./data)
#   make test   everything CI runs: format, lints, unit/integration tests on SQLite and
#               PostgreSQL, and the browser suite in Chromium
# Both install what is missing first (scripts/install-tools).

.PHONY: run test tools bench

# With no KUBECONFIG / BANLIEUE_KUBECONFIG, the console starts its dev cluster (the
# Kubernetes emulator with the chart and a demo pool) inside the same process.
run: tools
	mkdir -p data
	BANLIEUE_DEV_CLUSTER=true cargo leptos serve $(if $(RELEASE),--release)

test: tools
	scripts/test

tools:
	scripts/install-tools

bench: tools
	cargo bench -p server
	cargo bench -p kube-emulator --bench perf
	cargo bench -p banlieue-cluster --bench bind
