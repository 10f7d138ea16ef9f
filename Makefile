# pylog: set-up, run and test from a fresh clone.
#   make run   - virtualenv + pylog, then a single-node broker on 127.0.0.1:9092 (data in ./pylog-data)
#   make test  - virtualenv + test extras + kcat + kafkajs + chromium, then ruff and the whole test suite

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
DATA_DIR ?= ./pylog-data
LISTEN ?= 127.0.0.1:9092
JS_DIR := compat-tests/js
PYTEST_ARGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test venv install install-test kcat kafkajs chromium iproute2 lint pytest bench clean

run: install
	exec $(VENV)/bin/pylog broker --data-dir $(DATA_DIR) --listen $(LISTEN)

# Lint and tests both run; the target fails if either fails (pytest's 5, "no tests", included).
test: install-test kcat kafkajs chromium iproute2
	@rc=0; \
	$(VENV)/bin/ruff check . || rc=1; \
	$(VPY) -m pytest $(wildcard tests compat-tests) $(PYTEST_ARGS) || rc=1; \
	exit $$rc

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

install: $(VPY)
	$(VPY) -m pip install -e .

install-test: $(VPY)
	$(VPY) -m pip install -e '.[test]'

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

kafkajs: $(JS_DIR)/node_modules/.installed

$(JS_DIR)/node_modules/.installed: $(JS_DIR)/package.json $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && (npm ci --no-audit --no-fund || npm install --no-audit --no-fund)
	touch $@

lint: $(VPY)
	$(VENV)/bin/ruff check .

pytest: $(VPY)
	$(VPY) -m pytest $(wildcard tests compat-tests) $(PYTEST_ARGS)

bench: $(VPY)
	$(VPY) -m pip install -e '.[bench]'
	$(VPY) bench/bench_clients.py

clean:
	rm -rf $(VENV) $(JS_DIR)/node_modules .pytest_cache .ruff_cache
