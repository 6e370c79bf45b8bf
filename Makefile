# speculators-qwen-compat: demo, tests, lint and the test environments.
# Test environments (tools/environments.py, declared in envs/environments.toml, built with uv once and
# reused across runs and clones: the checkout's .venvs links to
# ~/.cache/speculators-qwen-compat/envs, or use $VENVS): tools (ruff), two base venvs holding
# torch (base-cpu: torch 2.13.0 CPU; base-vision: torch 2.14.1 + torchvision 0.29.1), one
# --target folder per speculators release (rel/<release>: speculators --no-deps, its
# transformers/datasets), a vLLM venv (vllm) and the real Qwen vocabulary (assets/qwen36-vocab).
# Each is a link to a store folder named by the hash of its recipe, built beside it and swapped in
# whole; uv gets the machine's package sources from pip's config (tools/uv.py).
# tools/release_python.sh runs one release. This package goes from its wheel (not editable,
# rebuilt on every run) into this checkout's own venv over a base venv (build/venv-cpu,
# build/venv-vision: tools/environments.py install), never into the shared base venvs, so two checkouts
# test their own code at the same time. `make test` and `make test-quick` are tools/matrix.py:
# the builds and the test passes run concurrently, and it prints the wall time of each part.

PYTHON ?= python3.11
export PYTHON
# Every command below writes bytecode as it imports (uv installs none; docs/maintainers.md says
# why): the vLLM servers, the tools venv and the builds run outside tools/release_python.sh.
unexport PYTHONDONTWRITEBYTECODE
VENVS ?= .venvs
# An empty VENVS (`make VENVS= demo`) means the default, as in tools/release_python.sh; not
# handed down, so the commands below find the checkout's .venvs themselves (a relative one
# would break a child that runs in another folder).
ifeq ($(strip $(VENVS)),)
override VENVS := .venvs
unexport VENVS
endif
WHEEL_DIR := build/wheel
# The two releases the quick loop uses (the seed's and the newest); the full list is
# speculators_qwen_compat/core/releases.py, read by tools/matrix.py (never at parse time here).
CORE_RELEASES := 0.5.0 0.9.0
DEMO_RELEASE := 0.9.0
PYTEST_ARGS ?=
MATRIX := HF_HUB_OFFLINE=1 $(PYTHON) tools/matrix.py
ENVS := $(PYTHON) tools/environments.py
# `make test-main`: the release suite against speculators from upstream's main (a git URL, URL@REF
# or a local checkout).
SPECULATORS_GIT ?= git+https://github.com/vllm-project/speculators@main

.PHONY: help test test-quick test-main test-pipeline demo lint wheel install install-vision venvs vocab matrix \
	check-new-release support-table patches bench bench-acceptance clean distclean tools-venv base-cpu \
	base-vision vllm specforge bench-images bench-envs bench-hub-memory

help:
	@echo "make demo       - prepare_data on the bundled tiny Qwen3.6-style tokenizer and sample data"
	@echo "make test       - lint, then every test pass against every tested release (timed)"
	@echo "make test-quick - lint and the suite against $(CORE_RELEASES) only"
	@echo "make test-main  - the newest release's suite on speculators from upstream's main"
	@echo "make test-pipeline - prepare_data -> a real vLLM's hidden states -> a training step (CPU)"
	@echo "make lint       - ruff"
	@echo "make check-new-release - the suite against any PyPI release newer than the table"
	@echo "make bench      - speed and memory ratios side by side, then bench-hub-memory, bench-acceptance"
	@echo "make bench-hub-memory - parquet with inline images vs JSONL with paths: memory, disk, CPU"
	@echo "make bench-acceptance - drafters trained with the fixes off and on: acceptance (CPU)"
	@echo "make patches    - regenerate patches/ from the package's normaliser and local rendering"

# tools/environments.py decides itself whether an environment is current (its recipe's hash).
tools-venv:
	$(ENVS) build tools
base-cpu:
	$(ENVS) build base-cpu
base-vision:
	$(ENVS) build base-vision
vllm:
	$(ENVS) build vllm vllm-torchvision
vocab:
	$(ENVS) build assets/qwen36-vocab
specforge:
	$(ENVS) build rel/specforge-0.2.0
# Not phony: GNU make never searches pattern rules for a phony target (release-0.9.0 would be
# "nothing to be done" on a fresh machine); no file of that name exists, so the recipe always
# runs and tools/environments.py decides.
release-%:
	$(ENVS) build rel/$*

wheel:
	$(ENVS) wheel

# This checkout's venv build/venv-cpu (build/venv-vision): this package's wheel (not editable)
# over the shared base venv, which stays untouched (tools/environments.py install).
install: wheel
	$(ENVS) install cpu

install-vision: wheel
	$(ENVS) install vision

lint: tools-venv
	$(VENVS)/tools/bin/ruff check speculators_qwen_compat tests tools bench
	$(VENVS)/tools/bin/ruff format --check speculators_qwen_compat tests tools bench

# Everything: lint, every build, every test pass (tools/matrix.py runs them concurrently), then
# the wall time of each part, a release x fix table and `matrix: N passed, M failed`.
test: matrix

matrix:
	$(MATRIX) -- $(PYTEST_ARGS)

test-quick:
	$(MATRIX) --quick -- $(PYTEST_ARGS)

# The nightly's other line: the newest release's suite with speculators from upstream's main
# (rel/main), ending `main: N passed, M failed` and the fixes whose state differs from the newest
# release's.
test-main:
	$(MATRIX) --main "$(SPECULATORS_GIT)" -- $(PYTEST_ARGS)

# prepare_data -> a real vLLM (.venvs/vllm) extracting hidden states -> generate-offline-data ->
# one EAGLE-3 and one DFlash step, offline and online, for tiny Qwen3.6-class composite
# checkpoints, dense and MoE (tests/pipeline; speculators 0.9.0; prepare_data on the vision venv:
# the processor path). One vLLM server at a time on 127.0.0.1.
test-pipeline: install install-vision release-0.9.0 vllm
	HF_HUB_OFFLINE=1 tools/release_python.sh 0.9.0 -P -m pytest \
		-q -p no:cacheprovider $(PYTEST_ARGS) tests/pipeline

check-new-release: install tools-venv
	HF_HUB_OFFLINE=1 $(VENVS)/tools/bin/python tools/check_new_release.py

# patches/<release>/ fixes that carry the package's logic, built from it (tools/make_patches.py)
patches: tools-venv
	$(VENVS)/tools/bin/python tools/make_patches.py

support-table: tools-venv
	$(VENVS)/tools/bin/python tools/support_table.py

# The release folder first: base-cpu builds beside its installs (tools/environments.py).
demo: release-$(DEMO_RELEASE) install
	@rm -rf demo-output
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 tools/release_python.sh $(DEMO_RELEASE) \
		-m speculators_qwen_compat.prepare_data \
		--model speculators_qwen_compat/demo/tiny-qwen36 \
		--data speculators_qwen_compat/demo/sample_openai.jsonl \
		--data speculators_qwen_compat/demo/sample_sharegpt.jsonl \
		--output demo-output --seq-length 512 --num-preprocessing-workers 2 2> demo-output.log \
		|| { tail -n 5 demo-output.log; exit 1; }
	@echo "output: $(CURDIR)/demo-output (log: demo-output.log)"

# Ratios measured side by side in one run (bench/run_bench.py): prints the table, writes
# bench/RESULTS.md and the bench blocks of docs/maintainers.md.
bench: install tools-venv release-0.5.0 release-0.9.0 vllm vocab specforge
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(VENVS)/tools/bin/python \
		bench/run_bench.py
	$(MAKE) bench-hub-memory
	$(MAKE) bench-acceptance

# Drafters trained through upstream's trainer on CPU with the fixes off and on, on tiny verifiers
# trained here once per machine (bench/verifier.py, kept in $(VENVS)/verifiers by their recipe's
# hash: about 30 minutes the first time), judged by vLLM's own acceptance counters; the on-policy
# arm, the mis-scaled drafter fine-tuned, and the acceptance command on the served drafter:
# bench/acceptance.py; writes its sections of bench/RESULTS.md (after run_bench.py rewrote the
# file) and docs/training.md.
bench-acceptance: install install-vision tools-venv release-0.8.1 release-0.9.0 vllm
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(VENVS)/tools/bin/python \
		bench/acceptance.py

# Cold and warm `make demo` and `make test` from a clean clone (an empty environment folder, then
# the environments it built): docs/maintainers.md's env-times block. About 80 minutes on 2 cores.
bench-envs:
	$(PYTHON) bench/env_times.py demo test

# Parquet with inline images vs the same rows as JSONL with paths, 24,000 rows (~300 MB), 1 and 8
# workers: peak memory, temporary disk, CPU (docs/images.md's hub-memory block). About 40 minutes.
bench-hub-memory: install-vision tools-venv release-0.9.0 vocab
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(VENVS)/tools/bin/python bench/hub_memory.py --doc

# The image slice alone (ratio 2c and the per-image cost): docs/images.md's image-bench block.
bench-images: install install-vision tools-venv release-0.9.0 vllm vocab
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
		$(VENVS)/tools/bin/python bench/run_bench.py --only images

clean:
	rm -rf build demo-output demo-output.log

distclean: clean
	rm -rf $(VENVS)
