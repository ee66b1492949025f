# zaqar-lite: `make serve` installs the server alone and runs it on SQLite;
# `make test` installs every extra and runs every suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= redis,mongodb,swift,spark,keystone,encryption,test
# the server and its SQLite store only: no extra (the other stores and Spark are extras)
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed
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

.PHONY: install serve test tempest tempest-venv zaqar-unit zaqar-unit-venv keystone-venv lint bench clean

$(BASE_STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(BASE_STAMP)

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
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

# lint first: a lint failure fails `make test` before any suite runs. The four virtualenvs
# are built side by side (in a fresh clone, as CI's, each is built from scratch, each pip
# mostly on one core), lint once the project's is there.
test:
	$(MAKE) --jobs=3 --output-sync=target lint $(TEMPEST_STAMP) $(KEYSTONE_STAMP) $(ZAQAR_UNIT_STAMP)
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

clean:
	rm -rf $(VENV) $(TEMPEST_VENV) $(ZAQAR_UNIT_VENV) $(KEYSTONE_VENV) build *.egg-info .pytest_cache
