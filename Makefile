# pylog: set-up, run and test from a fresh clone.
#   make run          - virtualenv + pylog with its notebook and registry extras (what the README's examples
#                       use), then a single-node broker on 127.0.0.1:9092 (data in ./pylog-data)
#   make test         - virtualenv with the locked test environment (requirements/test.lock) + kcat +
#                       kafkajs and oidc-provider (package-lock.json) + chromium + prometheus + the Arrow readers'
#                       next majors (requirements/readers2.lock, in build/readers2), then ruff and the whole test suite
#   make test-latest  - the same suite in .venv-latest, with the newest releases pyproject.toml allows
#   make lock         - write the versions installed in $(VENV) to requirements/test.lock
#   make typecheck    - mypy over the whole pylog package and the message classes' stub (also part of make test)
#   make messages     - regenerate protocol/messages/__init__.pyi, the static types of the message classes

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
DATA_DIR ?= ./pylog-data
LISTEN ?= 127.0.0.1:9092
JS_DIR := compat-tests/js
OIDC_DIR := compat-tests/oidc
PYTEST_ARGS ?=
# pytest processes of make test: most tests wait on brokers, clients and timers, so two workers
# keep both cores busy (1 runs the suite in one process)
TEST_WORKERS ?= 2
LOCK := requirements/test.lock
# how install-test picks versions: the lock's (make test) or the newest allowed (make test-latest)
TEST_PIN ?= -c $(LOCK)
LATEST_VENV ?= .venv-latest
# The lock keeps these on their previous major, so that make test and make test-latest together run the
# SDK's adapters on both majors of each
LOCK_HOLD := 'duckdb<2' 'polars<2'
# ... and the segment files are read by the next majors too, in a process of their own (no pylog):
# requirements/readers2.lock installed apart from $(VENV), in build/readers2
READERS2_LOCK := requirements/readers2.lock
READERS2 := build/readers2
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test test-latest lock venv install install-test install-readers2 kcat kafkajs oidc chromium iproute2 prometheus lint pytest \
	bench clean \
	messages typecheck typecheck-run

run: install
	exec $(VENV)/bin/pylog broker --data-dir $(DATA_DIR) --listen $(LISTEN)

# Lint and tests both run; the target fails if either fails (pytest's 5, "no tests", included).
test: install-test install-readers2 kcat kafkajs oidc chromium iproute2 prometheus
	@rc=0; \
	$(VENV)/bin/ruff check . || rc=1; \
	$(MAKE) --no-print-directory typecheck-run || rc=1; \
	$(VPY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(wildcard tests compat-tests) $(PYTEST_ARGS) || rc=1; \
	exit $$rc

# The codec builds the message classes from Kafka's JSON at import; their static types are a
# checked-in stub (tests/protocol/test_message_stubs.py fails when it is out of date).
messages: install
	$(VPY) -m pylog.protocol.stubgen

# mypy cannot follow the editable install's import hook, so it reads pylog through a tree of links
# laid out as installed (pyproject.toml's package-dir); its settings are in pyproject.toml. -p pylog
# takes in the message classes' stub (pylog.protocol.messages): naming it again is a duplicate module.
TYPECHECK_TREE := build/typecheck
typecheck: install-test typecheck-run

typecheck-run:
	@rm -rf $(TYPECHECK_TREE) && mkdir -p $(TYPECHECK_TREE)/pylog
	@for f in pylog/*; do ln -s "$(CURDIR)/$$f" $(TYPECHECK_TREE)/pylog/; done
	@for d in protocol storage widgets; do ln -s "$(CURDIR)/$$d" $(TYPECHECK_TREE)/pylog/$$d; done
	MYPYPATH=$(TYPECHECK_TREE) $(VENV)/bin/mypy -p pylog

# Debian's Python needs python3-venv (ensurepip) before `python3 -m venv` works.
$(VPY):
	@if ! $(PYTHON) -m venv $(VENV); then \
	  rm -rf $(VENV); \
	  echo "python venv module unusable; installing Debian's python3-venv"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv \
	    "python$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv" && \
	  $(PYTHON) -m venv $(VENV); \
	fi
	$(VPY) -m pip install --quiet --upgrade pip

venv: $(VPY)

# the extras the README's sections use: pandas, Polars, DuckDB, the widgets (notebook), the schema registry
install: $(VPY)
	$(VPY) -m pip install -e '.[notebook,registry]'

install-test: $(VPY)
	$(VPY) -m pip install $(TEST_PIN) -e '.[test]'

install-readers2: $(READERS2)/.installed

$(READERS2)/.installed: $(READERS2_LOCK) | $(VPY)
	rm -rf $(READERS2)
	$(VPY) -m pip install --quiet --target $(READERS2) -r $(READERS2_LOCK)
	touch $@

# Drift on purpose: the newest releases of every dependency, in a venv of their own.
test-latest:
	$(MAKE) test VENV=$(LATEST_VENV) TEST_PIN="--upgrade --upgrade-strategy eager"

# The lock is what $(VENV) holds once pylog[test] is installed in it (a dependency added to
# pyproject.toml is installed at its newest release, the others stay as they are, LOCK_HOLD applies).
# To move the lock to the newest releases: `make test-latest`, then, once green,
# `make lock VENV=$(LATEST_VENV)`.
lock: $(VPY)
	$(VPY) -m pip install -e '.[test]' $(LOCK_HOLD)
	@mkdir -p $(dir $(LOCK))
	@{ echo "# The Python test environment of \`make test\` (pip constraints): every package and the exact"; \
	  echo "# version the whole suite last passed with, on Python $$($(VPY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')."; \
	  echo "# Written by \`make lock\` (pip freeze of $(VENV)); refresh it whenever a dependency changes."; \
	  $(VPY) -m pip freeze --exclude-editable --disable-pip-version-check; } > $(LOCK).tmp
	@mv $(LOCK).tmp $(LOCK)
	@echo "wrote $(LOCK): $$(grep -c '==' $(LOCK)) packages"

kcat:
	@if ! command -v kcat >/dev/null 2>&1; then \
	  echo "installing Debian's kcat"; \
	  $(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y kcat; \
	fi
	@kcat -V | head -n 4 | tail -n 1

# Headless Chromium renders the notebook widgets in the browser test.
# The network-partition tests put cluster nodes in network namespaces (`ip netns`, veth, bridge).
iproute2:
	@if ! command -v ip >/dev/null 2>&1; then \
	  echo "installing Debian's iproute2"; \
	  $(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y iproute2; \
	fi

chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "installing Debian's chromium"; \
	  $(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi

# The metrics tests scrape a cluster with a real Prometheus server and check the alert rules with promtool.
prometheus:
	@if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then \
	  echo "installing Debian's prometheus"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; \
	fi
	@prometheus --version 2>&1 | head -n 1

kafkajs: $(JS_DIR)/node_modules/.installed

$(JS_DIR)/node_modules/.installed: $(JS_DIR)/package.json $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && (npm ci --no-audit --no-fund || npm install --no-audit --no-fund)
	touch $@

# the OpenID Connect provider (oidc-provider) the OAUTHBEARER tests take tokens from
oidc: $(OIDC_DIR)/node_modules/.installed

$(OIDC_DIR)/node_modules/.installed: $(OIDC_DIR)/package.json $(OIDC_DIR)/package-lock.json
	cd $(OIDC_DIR) && (npm ci --no-audit --no-fund || npm install --no-audit --no-fund)
	touch $@

lint: $(VPY)
	$(VENV)/bin/ruff check .

pytest: $(VPY)
	$(VPY) -m pytest $(wildcard tests compat-tests) $(PYTEST_ARGS)

bench: $(VPY)
	$(VPY) -m pip install -e '.[bench]'
	$(VPY) bench/bench_clients.py

clean:
	rm -rf $(VENV) $(LATEST_VENV) $(JS_DIR)/node_modules .pytest_cache .ruff_cache build dist
