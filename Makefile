# speculators-qwen-compat: demo, tests, lint and the test environments.
# Test environments (tools/build_venv.sh, built once, reused): two shared base venvs holding torch
# (.venvs/base-cpu: torch 2.13.0 CPU; .venvs/base-vision: torch 2.14.1 + torchvision 0.29.1), one
# --target folder per speculators release (.venvs/rel/<release>: speculators --no-deps, its
# transformers/datasets), and a vLLM venv (.venvs/vllm). tools/release_python.sh runs one release.
# This package goes into the base venvs from its wheel (not editable), rebuilt on every run.

PYTHON ?= python3.11
export PYTHON
VENVS := .venvs
WHEEL_DIR := build/wheel
# The two releases the quick loop uses (the seed's and the newest); the full list is
# speculators_qwen_compat/core/releases.py, read by tools/matrix.py (never at parse time here).
CORE_RELEASES := 0.5.0 0.9.0
DEMO_RELEASE := 0.9.0
PYTEST_ARGS ?=

.PHONY: help test test-quick demo lint wheel install install-vision venvs vocab matrix \
	check-new-release support-table bench clean distclean

help:
	@echo "make demo       - prepare_data on the bundled tiny Qwen3.6-style tokenizer and sample data"
	@echo "make test       - lint, then the whole suite against every tested release"
	@echo "make test-quick - the same against $(CORE_RELEASES) only"
	@echo "make lint       - ruff"
	@echo "make check-new-release - the suite against any PyPI release newer than the table"
	@echo "make bench      - speed and memory ratios measured side by side"

$(VENVS)/tools/.built:
	$(PYTHON) -m venv $(VENVS)/tools
	$(VENVS)/tools/bin/python -m pip -q --disable-pip-version-check install \
		ruff==0.17.6 build==1.6.1 packaging==26.4
	touch $@

$(VENVS)/base-cpu/.built: envs/common.txt tools/build_venv.sh
	tools/build_venv.sh base-cpu

$(VENVS)/base-vision/.built: envs/common.txt tools/build_venv.sh
	tools/build_venv.sh base-vision

$(VENVS)/rel/%/.built: envs/%.txt envs/common.txt tools/build_venv.sh
	tools/build_venv.sh release $*

$(VENVS)/vllm/.built: tools/build_venv.sh
	tools/build_venv.sh vllm

# The real Qwen3.5/3.6 vocabulary (never committed): tests find it here or in $QWEN_VOCAB_DIR.
VOCAB := $(VENVS)/assets/qwen36-vocab/.built
$(VOCAB): tools/build_qwen_vocab.py $(VENVS)/base-cpu/.built
	rm -rf $(dir $@)
	$(VENVS)/base-cpu/bin/python tools/build_qwen_vocab.py $(dir $@)
	touch $@

vocab: $(VOCAB)

wheel: $(VENVS)/tools/.built
	rm -rf $(WHEEL_DIR)
	$(VENVS)/tools/bin/python -m build -q --wheel --outdir $(WHEEL_DIR) . >/dev/null

# This package's wheel (not editable) in the shared base venv; every release folder sees it.
install: $(VENVS)/base-cpu/.built wheel
	$(VENVS)/base-cpu/bin/python -m pip -q --disable-pip-version-check install --force-reinstall \
		--no-deps $(WHEEL_DIR)/*.whl

install-vision: $(VENVS)/base-vision/.built wheel
	$(VENVS)/base-vision/bin/python -m pip -q --disable-pip-version-check install \
		--force-reinstall --no-deps $(WHEEL_DIR)/*.whl

lint: $(VENVS)/tools/.built
	$(VENVS)/tools/bin/ruff check speculators_qwen_compat tests tools bench
	$(VENVS)/tools/bin/ruff format --check speculators_qwen_compat tests tools bench

# The whole suite: every tested release (tools/matrix.py builds what is missing), a release x fix
# table, and the wall time of each part.
test: matrix

matrix: lint install $(VOCAB)
	HF_HUB_OFFLINE=1 $(VENVS)/tools/bin/python tools/matrix.py $(PYTEST_ARGS)

test-quick: lint install $(VOCAB) $(addprefix $(VENVS)/rel/,$(addsuffix /.built,$(CORE_RELEASES)))
	@set -e; for r in $(CORE_RELEASES); do \
		echo "== speculators $$r"; \
		HF_HUB_OFFLINE=1 tools/release_python.sh $$r -P -m pytest -q -p no:cacheprovider \
			$(PYTEST_ARGS) tests; \
	done

check-new-release: install
	HF_HUB_OFFLINE=1 $(VENVS)/tools/bin/python tools/check_new_release.py

support-table: $(VENVS)/tools/.built
	$(VENVS)/tools/bin/python tools/support_table.py

demo: install $(VENVS)/rel/$(DEMO_RELEASE)/.built
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
# bench/RESULTS.md and the bench section of README.md.
bench: install $(VENVS)/rel/0.5.0/.built $(VENVS)/rel/0.9.0/.built $(VENVS)/vllm/.built $(VOCAB)
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(VENVS)/tools/bin/python bench/run_bench.py

clean:
	rm -rf build demo-output demo-output.log

distclean: clean
	rm -rf $(VENVS)
