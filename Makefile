# zaqar-lite: `make serve` installs and runs on SQLite; `make test` installs and runs every suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= redis,mongodb,swift,spark,test
STAMP := $(VENV)/.installed

.PHONY: install serve test lint bench clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/zaqar-lite serve

test: $(STAMP)
	bash tests/install_servers.sh
	bash tests/run_all.sh $(BIN)

lint: $(STAMP)
	$(BIN)/ruff check zaqar_lite spark_jobs tests benchmarks
	$(BIN)/mypy zaqar_lite

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
