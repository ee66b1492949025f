# zaqar-lite: `make serve` installs the server alone and runs it on SQLite;
# `make test` installs every extra and runs every suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= redis,mongodb,swift,spark,keystone,encryption,sqs,test
# the server and its SQLite store only: no extra (the other stores and Spark are extras)
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed
# Every install here takes the versions of the locks in constraints/ (pip install -c), and builds
# zaqar-lite with their setuptools; `make lock` writes them with uv from setup.cfg, whose ranges
# stay for those who install zaqar-lite as a library (README.rst, "Locked versions").
BASE_LOCK := constraints/base.txt
ALL_LOCK := constraints/all.txt
LOCKED_EXTRAS := redis mongodb swift spark keystone encryption sqs test bench
UV_VERSION := 0.13.8
LOCK_VENV ?= .venv-lock
UV := $(LOCK_VENV)/bin/uv
# --universal: one lock for every platform and every Python from 3.11 on (markers where they differ)
UV_COMPILE := UV_CUSTOM_COMPILE_COMMAND="make lock" $(UV) pip compile --quiet --universal \
	--python-version 3.11 $(if $(UPGRADE),--upgrade) setup.cfg constraints/tools.in
# tempest and zaqar-tempest-plugin (Zaqar's own API suite) live in a virtualenv of their own
TEMPEST_VENV ?= .venv-tempest
TEMPEST_STAMP := $(TEMPEST_VENV)/.installed
# Zaqar 23 itself (--no-deps) and what its wsgi v2 unit tests import, for running those tests
# over HTTP against zaqar-lite (tests/zaqar_unit/run.py), likewise in a virtualenv of their own
ZAQAR_UNIT_VENV ?= .venv-zaqar-unit
ZAQAR_UNIT_STAMP := $(ZAQAR_UNIT_VENV)/.installed
# a real Keystone for the keystone auth suites, likewise in a virtualenv of its own
KEYSTONE_VENV ?= .venv-keystone
KEYSTONE_STAMP := $(KEYSTONE_VENV)/.installed

.PHONY: install serve test quickstart lock tempest tempest-venv zaqar-unit zaqar-unit-venv keystone-venv lint budget bench clean

$(BASE_STAMP): setup.cfg pyproject.toml $(BASE_LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c $(BASE_LOCK) --upgrade pip
	$(BIN)/pip install --quiet -c $(BASE_LOCK) --build-constraint $(BASE_LOCK) -e .
	touch $(BASE_STAMP)

$(STAMP): setup.cfg pyproject.toml $(ALL_LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c $(ALL_LOCK) --upgrade pip
	$(BIN)/pip install --quiet -c $(ALL_LOCK) --build-constraint $(ALL_LOCK) -e '.[$(EXTRAS)]'
	touch $(BASE_STAMP) $(STAMP)

$(TEMPEST_STAMP): tests/tempest/requirements.txt
	$(PYTHON) -m venv $(TEMPEST_VENV)
	$(TEMPEST_VENV)/bin/pip install --quiet -r tests/tempest/requirements.txt
	touch $(TEMPEST_STAMP)

$(ZAQAR_UNIT_STAMP): tests/zaqar_unit/requirements.txt tests/zaqar_unit/zaqar-requirements.txt
	$(PYTHON) -m venv $(ZAQAR_UNIT_VENV)
	$(ZAQAR_UNIT_VENV)/bin/pip install --quiet --no-deps -r tests/zaqar_unit/zaqar-requirements.txt
	$(ZAQAR_UNIT_VENV)/bin/pip install --quiet -r tests/zaqar_unit/requirements.txt
	touch $(ZAQAR_UNIT_STAMP)

$(KEYSTONE_STAMP): tests/servers/keystone-requirements.txt
	$(PYTHON) -m venv $(KEYSTONE_VENV)
	$(KEYSTONE_VENV)/bin/pip install --quiet -r tests/servers/keystone-requirements.txt
	touch $(KEYSTONE_STAMP)

install: $(STAMP)

tempest-venv: $(TEMPEST_STAMP)

zaqar-unit-venv: $(ZAQAR_UNIT_STAMP)

keystone-venv: $(KEYSTONE_STAMP)

serve: $(BASE_STAMP)
	$(BIN)/zaqar-lite serve

# The README's quick start as a newcomer runs it: `make serve` in a copy of this checkout (a
# virtual environment of its own, the base install only), then ping, a post, a claim and a
# delete over HTTP, and Ctrl-C (tests/quickstart.py).
quickstart:
	$(PYTHON) tests/quickstart.py

# lint first: a lint failure fails `make test` before any suite runs. The quick start and the
# four virtualenvs are built side by side (in a fresh clone, as CI's, each is built from
# scratch, each pip mostly on one core), lint once the project's is there.
test:
	$(MAKE) --jobs=5 --output-sync=target lint quickstart $(TEMPEST_STAMP) $(KEYSTONE_STAMP) $(ZAQAR_UNIT_STAMP)
	bash tests/install_servers.sh
	TEMPEST_VENV=$(TEMPEST_VENV) ZAQAR_UNIT_VENV=$(ZAQAR_UNIT_VENV) KEYSTONE_VENV=$(abspath $(KEYSTONE_VENV)) bash tests/run_all.sh $(BIN)

# Zaqar's own API suite alone (zaqar-tempest-plugin v2 tests against a real server)
tempest: $(STAMP) $(TEMPEST_STAMP)
	$(BIN)/python -m tests.tempest.run --venv $(TEMPEST_VENV)

# Zaqar 23's own black-box wsgi v2 unit tests, over HTTP against a real server
zaqar-unit: $(STAMP) $(ZAQAR_UNIT_STAMP)
	$(BIN)/python -m tests.zaqar_unit.run --venv $(ZAQAR_UNIT_VENV)

# ruff (with a complexity limit) and mypy --strict, both configured in pyproject.toml
lint: $(STAMP)
	$(BIN)/ruff check zaqar_lite spark_jobs tests benchmarks
	$(BIN)/mypy zaqar_lite

# The request path's budget: count the Python bytecode instructions a post, a claim, a delete
# and a release execute through the real app (SQLite, and Redis when redis-server is on the
# PATH) and write them to tests/budget/request_cost.json, which tests/test_request_budget.py
# holds every later count to (README.rst, "Request budget"). Run it on purpose, and commit the file.
budget: $(STAMP)
	$(BIN)/python -m tests.budget --update

$(UV):
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet uv==$(UV_VERSION)

# Write the locks: every extra together first (what `make test` installs), then the base and
# each extra alone within it, so that any of them agree. A pin stays where setup.cfg still
# allows it; `make lock UPGRADE=1` moves every pin to the newest release setup.cfg allows.
lock: $(UV)
	$(UV_COMPILE) --all-extras -o $(ALL_LOCK)
	$(UV_COMPILE) -c $(ALL_LOCK) -o $(BASE_LOCK)
	for extra in $(LOCKED_EXTRAS); do \
	    $(UV_COMPILE) --extra $$extra -c $(ALL_LOCK) -o constraints/$$extra.txt || exit 1; \
	done

clean:
	rm -rf $(VENV) $(TEMPEST_VENV) $(ZAQAR_UNIT_VENV) $(KEYSTONE_VENV) $(LOCK_VENV) build *.egg-info .pytest_cache
