# Two entry points a fresh machine needs: `make demo` and `make test`.
# Everything else (the virtualenv, the package, the dev tools) installs itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
WARM   := $(VENV)/pycache/.collected

.PHONY: lock demo test test-real test-real-sandbox lint typecheck unit bench install clean registry prometheus test-packages

# The template's example Python migrations (catalog-repo-template/migrations-example) are
# installed too: validating the template needs their registered names.
EXAMPLE := catalog-repo-template/migrations-example

# Installs exactly what requirements/dev.lock pins, every file checked against its hash.
# The installer is uv (one wheel, itself pinned by hash in requirements/bootstrap.lock and
# installed by pip): it installs the lock in seconds where pip took minutes, with the same
# --require-hashes semantics (a file whose hash is not in the lock is refused). The two
# local packages are then installed without dependencies and without build isolation
# (their build backend, setuptools, is pinned in the same lock), so a fresh machine with
# Python 3.11 and git gets the environment CI and the image were tested with.
# The virtualenv gets no pip of its own when this Python has a pip that installs into
# another interpreter (pip's --python, since pip 22.3): ensurepip copying pip into each
# new virtualenv was 3.3 s of a fresh install's 8 s, for one wheel (uv). A Python whose
# pip is older or missing gets pip in the virtualenv, as before. uv then installs.
# No --compile-bytecode: compiling every installed package (mypy, hypothesis, the kubernetes
# client's 800 model modules...) cost 13 s of CPU in each fresh install, most of it for
# modules nothing here imports, and the tests and the demo read their bytecode from
# .venv/pycache (PYTHONPYCACHEPREFIX below), not from beside the packages. Each module is
# compiled there once, by the first process that imports it.
$(STAMP): pyproject.toml $(EXAMPLE)/pyproject.toml requirements/dev.lock requirements/bootstrap.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "reconciler needs Python 3.11 or newer; set PYTHON=python3.11")'
	$(PYTHON) -m venv --without-pip $(VENV)
	@if $(PYTHON) -m pip --python $(BIN)/python --version >/dev/null 2>&1; then \
		echo "$(PYTHON) -m pip --python $(BIN)/python install -r requirements/bootstrap.lock"; \
		$(PYTHON) -m pip --python $(BIN)/python install --quiet --disable-pip-version-check \
			--require-hashes -r requirements/bootstrap.lock; \
	else \
		echo "$(BIN)/python -m ensurepip; $(BIN)/python -m pip install -r requirements/bootstrap.lock"; \
		$(BIN)/python -m ensurepip --default-pip >/dev/null && \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check \
			--require-hashes -r requirements/bootstrap.lock; \
	fi
	$(BIN)/uv pip install --quiet --python $(BIN)/python --require-hashes -r requirements/dev.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps --no-build-isolation -e . -e $(EXAMPLE)
	@touch $(STAMP)

install: $(STAMP)

# The demo's image-build chapter runs a real registry too, and its metrics chapter a real
# Prometheus: installed when root and apt allow it; otherwise the demo skips that chapter
# and says how to get it.
demo: install
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		( $(call apt_install,,$(REGISTRY_BINARY)=docker-registry $(PROMETHEUS_BINARY)=prometheus) ) || true; fi
	$(BIN)/reconciler demo

lint: install
	$(BIN)/ruff check reconciler tests bench
	$(BIN)/ruff format --check reconciler tests bench

typecheck: install
	$(BIN)/mypy

# Six workers on two cores: the suite is mostly waiting (on sandboxes' controllers, daemons'
# poll intervals, soaks, child processes), not computing. Measured on 2 cores while a
# CPU-bound benchmark ran beside it: -n 2 took 656 s of wall for 302 s of CPU (45% of one
# core's worth per worker), -n 4 took 369 s of wall for 300 s of CPU, with the same passes.
# With four, a worker still waited 63% of its time (per-test CPU against wall, summed), so
# four kept 1.5 cores busy; each worker more costs one collection (3 s of CPU). `make test`
# on fresh clones, alternating: -n 4 162.96, 158.59 and 145.38 s, -n 6 144.95, 144.85 and
# 153.33 s (and the unit suite alone, back to back: 129.39 s for -n 4, 115.47 s for -n 6).
# UNIT_WORKERS="-n 4" for the old figure.
UNIT_WORKERS ?= -n 6
unit: install test-packages $(WARM)
	$(BIN)/pytest $(UNIT_WORKERS) $(UNIT_FLAGS)

# The Python processes of the tests and the demo keep their bytecode, even where
# PYTHONDONTWRITEBYTECODE is set (as on CI): under .venv/pycache, never beside the
# sources. Without it every pytest worker rewrote and compiled all test modules again
# (4 s of CPU each, the larger half of a collection) and each of the suite's hundreds of
# `reconciler` child processes compiled the modules it imports (0.2 s for a sandbox, more
# for the daemon's stack; the kubernetes client's models alone 0.9 s on a sandbox's first
# write).
demo typecheck unit test-real test-real-sandbox bench $(WARM): export PYTHONDONTWRITEBYTECODE =
demo typecheck unit test-real test-real-sandbox bench $(WARM): export PYTHONPYCACHEPREFIX = $(CURDIR)/$(VENV)/pycache

# A new virtualenv has nothing under .venv/pycache yet (uv's bytecode beside the packages
# is not read once a prefix is set): the workers that start together then each compiled
# and assertion-rewrote the same modules (measured on 2 busy cores, collecting without
# running: 28.7 s of CPU over 4 workers, against 10.4 s for one collection and 11.1 s
# for the 4 workers after it). So one collection fills it first, once per virtualenv;
# a test changed later is compiled again by the first worker that imports it. A
# collection error is left to the run that follows to report.
$(WARM): $(STAMP)
	-$(BIN)/pytest --collect-only -q >/dev/null 2>&1
	@mkdir -p $(@D) && touch $@

# the real_cluster lane against a standalone sandbox is part of it, so the lane users
# run against their own clusters cannot rot unnoticed. It runs beside the unit tests:
# its scenarios mostly wait on the sandbox's controllers (a tenth of the CPU the unit
# tests take), and each has a cluster name and namespaces of its own (tests/lanes.py),
# so the two share nothing but the machine. ruff and mypy run beside them too, rather
# than before them: a fresh clone has no mypy cache (9 s of CPU, one process) and the
# tests leave a core's worth idle. Each one's output is printed as it ends, and any of
# the four failing fails `make test`.
# Each lane scenario runs once: the lane plays its [real] variant, so the unit run is
# given --lane-runs-elsewhere and leaves out the [sandbox] twin (the same scenario against
# the same sandbox code: 106 tests, 19 s of CPU and 60 s of worker wall). A scenario only
# the sandbox can play (@pytest.mark.sandbox_lane_only) keeps its [sandbox] variant here,
# and one that skips in the lane without the mark fails there. `make unit` and a plain
# `pytest` run both variants' sandbox side: without the lane, nothing is lost.
test: install
	$(MAKE) --no-print-directory -j4 --output-sync=target lint typecheck unit test-real-sandbox \
		UNIT_FLAGS=--lane-runs-elsewhere

# The Debian packages the tests run for real, each installed when its binary is missing
# (needs root and apt):
# - docker-registry, the CNCF distribution server the tests of reconciler.registry push to;
# - prometheus, the server the tests of reconciler.analysis query;
# - chromium, with the fonts it recommends for pages (fonts-liberation), for the status
#   page's browser tests.
# Without root or apt, a missing registry or Prometheus fails `make test` with the command
# that installs it (those tests never skip); a missing Chromium is said, and its tests skip.
# One apt-get installs whatever is missing. There was one per package, and `make -j` ran
# them side by side: on a fresh machine the second died on dpkg's lock ("Could not get
# lock /var/lib/dpkg/lock-frontend"), and `make test` failed. DPkg::Lock::Timeout makes
# apt wait for any other apt instead (the demo's install, an unattended upgrade). No
# recommended packages: Chromium's brought 116 packages (avahi, CUPS, samba's libraries,
# perl, GTK's printing dialogs) and took 37 s of wall and 23 s of CPU inside a test.
REGISTRY_BINARY   := /usr/bin/docker-registry
PROMETHEUS_BINARY := /usr/bin/prometheus
CHROMIUM_BINARY   := /usr/bin/chromium
CHROMIUM_PACKAGES := chromium+fonts-liberation
APT := DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600

# $(call apt_install,NEEDED,WANTED): each is a list of binary=package pairs ('+' joins
# packages installed together); a NEEDED one that cannot be installed fails, a WANTED one
# is said (a distribution without Debian's chromium package still gets the registry and
# Prometheus; the browser tests then say what failed). `test -x` first, so a machine that
# has them all runs nothing.
apt_install = need=""; want=""; \
	for pair in $(1); do test -x "$${pair%%=*}" || need="$$need $${pair\#*=}"; done; \
	for pair in $(2); do test -x "$${pair%%=*}" || want="$$want $${pair\#*=}"; done; \
	need=$$(echo $$need | tr + ' '); want=$$(echo $$want | tr + ' '); \
	test -n "$$need$$want" || exit 0; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		if [ -n "$$want" ]; then echo "not installed: $$want (needs root and apt-get; its tests skip): apt-get install -y --no-install-recommends $$want" >&2; fi; \
		if [ -n "$$need" ]; then echo "not installed: $$need, which the tests need: install it as root with apt-get install -y --no-install-recommends $$need" >&2; exit 2; fi; \
		exit 0; fi; \
	echo "apt-get install -y --no-install-recommends" $$need $$want; \
	$(APT) install -q -y --no-install-recommends $$need $$want \
		|| { $(APT) update && $(APT) install -q -y --no-install-recommends $$need $$want; } \
		|| { test -n "$$want" && echo "could not install $$want: installing only what the tests need" >&2 \
			&& { test -z "$$need" || $(APT) install -q -y --no-install-recommends $$need; }; }

test-packages:
	@$(call apt_install,$(REGISTRY_BINARY)=docker-registry $(PROMETHEUS_BINARY)=prometheus,$(CHROMIUM_BINARY)=$(CHROMIUM_PACKAGES))
registry:
	@$(call apt_install,$(REGISTRY_BINARY)=docker-registry,)
prometheus:
	@$(call apt_install,$(PROMETHEUS_BINARY)=prometheus,)

# The real_cluster lane: every scenario that also runs against a real cluster (tests/kube,
# the daemon's rollouts and migrations, migration checks), each under a cluster name and
# in namespaces of its own (tests/lanes.py), so they run side by side: most of a scenario
# is waiting on the cluster's controllers, so more workers than CPUs still pay.
# RECONCILER_TEST_KUBECONFIG=~/.kube/config make test-real [REAL_WORKERS="-n 2"]
# Only the folders that hold the lane's scenarios are collected (tests/lanes.py's
# LANE_DIRS, which a test keeps equal to REAL_PATHS).
REAL_WORKERS ?= -n 4
REAL_PATHS := tests/daemon tests/kube tests/migrations tests/rollout
test-real: install $(WARM)
	@test -n "$$RECONCILER_TEST_KUBECONFIG" || { echo "set RECONCILER_TEST_KUBECONFIG to a cluster's kubeconfig (e.g. kind's ~/.kube/config)" >&2; exit 2; }
	$(BIN)/pytest -m real_cluster -p no:randomly $(REAL_WORKERS) $(REAL_PATHS)

# The same lane against a standalone sandbox in another process, as a stand-in for kind:
# a missing image tag fails there as ImagePullBackOff does on a real node. The sandbox
# first gets what a shared cluster holds besides the tests' objects (another
# reconciler's inventories under the same instance names, other tools' workloads:
# tests/foreign.py); they must all be there, untouched, when the lane is over.
# Two workers, not test-real's four: against one sandbox process on the same 2 cores the
# lane is bound by the sandbox, and each worker collects the lane's folders again.
# Measured on 2 cores beside other work: -n 4 took 73 s of wall for 39.8 s of CPU, -n 2
# 57 s for 28.1 s, -n 1 77 s for 26.2 s (make test runs it beside the unit suite, which
# takes longer, so its CPU is what counts there).
SANDBOX_LANE_WORKERS ?= -n 2
test-real-sandbox: install $(WARM)
	@dir=$$(mktemp -d); \
	$(BIN)/reconciler sandbox --write-kubeconfig $$dir/kubeconfig --controller-delay 0.02 \
		--pod-grace-scale 0.01 --fail-image '*:*-does-not-exist' >$$dir/sandbox.log 2>&1 & pid=$$!; \
	trap 'kill $$pid; rm -rf $$dir' EXIT; \
	for i in $$(seq 100); do test -s $$dir/kubeconfig && break; sleep 0.1; done; \
	$(BIN)/python -m tests.foreign seed $$dir/kubeconfig && \
	RECONCILER_TEST_KUBECONFIG=$$dir/kubeconfig $(MAKE) --no-print-directory test-real \
		REAL_WORKERS="$(SANDBOX_LANE_WORKERS)" && \
	$(BIN)/python -m tests.foreign check $$dir/kubeconfig

# Every bench at its documented size (each bench's docstring says what it measures); each
# prints its figures as `figure | name | value | goal | baseline | met` lines, the baseline
# measured in the same run. The run's output, with the load average at its start and end,
# goes to $(BENCH_OUT); bench/report.py then regenerates bench/README.md's table from it.
# A bench that fails stops the run and leaves the README as it was.
BENCH_OUT ?= bench/last-run.txt
BENCHES := \
	"catalog.py --apps 1000,5000" \
	"git.py" \
	"ledger.py" \
	"apply.py" \
	"daemon.py" \
	"rollout.py --instances 200" \
	"scale.py --sizes 1000 --busy 1" \
	"scale.py --sizes 1000 --busy 1 --inventory perNamespace" \
	"preview.py" \
	"waves.py --clusters 200"

bench: install
	@echo "load: $$(cut -d' ' -f1-3 /proc/loadavg)" > $(BENCH_OUT)
	@for bench in $(BENCHES); do \
		echo "== bench/$$bench" | tee -a $(BENCH_OUT); \
		{ $(BIN)/python -u bench/$$bench 2>&1; echo $$? > $(BENCH_OUT).status; } \
			| tee -a $(BENCH_OUT); \
		status=$$(cat $(BENCH_OUT).status); rm -f $(BENCH_OUT).status; \
		if [ $$status -ne 0 ]; then echo "bench/$$bench failed ($$status)" >&2; exit $$status; fi; \
	done
	@echo "load: $$(cut -d' ' -f1-3 /proc/loadavg)" >> $(BENCH_OUT)
	$(BIN)/python bench/report.py $(BENCH_OUT) --readme bench/README.md

# The lock files, from pyproject.toml's lower bounds and requirements/build.in, by uv
# (https://docs.astral.sh/uv/pip/compile/). Existing pins are kept unless asked:
# `make lock LOCK_FLAGS=--upgrade` moves everything to the newest allowed versions,
# `make lock LOCK_FLAGS="--upgrade-package aiohttp"` one package. runtime.lock (the
# image) and build.lock are constrained to dev.lock, so all three agree on versions.
LOCK_VENV  := .venv-lock
UV_COMPILE := $(LOCK_VENV)/bin/uv pip compile --quiet --universal --python-version 3.11 \
	--generate-hashes --custom-compile-command "make lock" $(LOCK_FLAGS)

$(LOCK_VENV)/bin/uv:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements/bootstrap.lock

lock: $(LOCK_VENV)/bin/uv
	$(UV_COMPILE) pyproject.toml requirements/build.in --extra dev -o requirements/dev.lock
	$(UV_COMPILE) pyproject.toml -c requirements/dev.lock -o requirements/runtime.lock
	$(UV_COMPILE) requirements/build.in -c requirements/dev.lock -o requirements/build.lock
	$(UV_COMPILE) requirements/bootstrap.in -o requirements/bootstrap.lock

clean:
	rm -rf $(VENV) $(LOCK_VENV) .mypy_cache .pytest_cache .ruff_cache
