# The two commands a user needs:  `make serve`  and  `make test`.
# Both install what is missing first (a venv with pinned packages, a pinned OPA).
SHELL := /bin/bash
PYTHON ?= python3.11
OPA_VERSION := v1.22.3
VENV := .venv
BIN := $(VENV)/bin
OPA := bin/opa

.PHONY: install redis serve demo test rego-check lint typecheck pytest schemas lock clean

install: $(VENV)/.installed bin/.opa-$(OPA_VERSION)

$(VENV)/.installed: pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
	touch $@

bin/.opa-$(OPA_VERSION):
	scripts/install-opa.sh $(OPA_VERSION)
	touch $@

serve: install  ## run the sidecar on embedded defaults, dev identity, 127.0.0.1:8080
	$(BIN)/whose serve --dev

demo: install  ## the launch-date story: what Alice and Bob receive
	$(BIN)/whose demo

test: install redis rego-check lint typecheck pytest  ## everything CI runs

redis:  ## the tests start their own redis-server; install Debian's if missing
	scripts/install-redis.sh

rego-check:
	$(OPA) fmt --list --fail rego
	$(OPA) check --strict rego
	$(OPA) test rego
	@$(OPA) test rego --coverage --threshold 100 > .rego-coverage.json \
	  || { echo "Rego coverage is below 100%: see .rego-coverage.json"; exit 1; }
	@$(BIN)/python -c 'import json; r = json.load(open(".rego-coverage.json")); \
	  print("Rego coverage: %s%% (%s lines)" % (r["coverage"], r["covered_lines"]))'

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy

pytest:
	$(BIN)/pytest

schemas: install  ## regenerate schemas/ from the pydantic models
	$(BIN)/whose schemas --out schemas

lock:  ## re-pin the transitive dependencies after changing pyproject.toml
	$(BIN)/pip freeze --exclude-editable > requirements.lock

clean:
	rm -rf $(VENV) bin .mypy_cache .pytest_cache .ruff_cache
