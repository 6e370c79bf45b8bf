# speculators-qwen-compat: demo, tests, lint and per-release venvs.
# Each test venv (.venvs/<release>) holds one speculators release installed with --no-deps beside
# the libraries its preprocessing imports (envs/<release>.txt), plus this package from its wheel.
# Venvs are built once and reused; the wheel is rebuilt and reinstalled on every run.

PYTHON ?= python3.11
# Every tested release, read from speculators_qwen_compat/releases.py (the one table).
RELEASES := $(shell $(PYTHON) -c 'import sys; sys.path.insert(0, "."); \
	from speculators_qwen_compat.core.releases import TESTED_RELEASES as t; print(*t)')
# The two releases the quick loop uses (the seed's and the newest).
CORE_RELEASES := 0.5.0 0.9.0
DEMO_RELEASE := 0.9.0
VENVS := .venvs
WHEEL_DIR := build/wheel
PYTEST_ARGS ?=

.PHONY: test test-quick demo lint wheel venvs clean help matrix check-new-release support-table bench

help:
	@echo "make demo   - prepare_data on the bundled tiny Qwen3.6-style tokenizer and sample data"
	@echo "make test   - lint, then the suite in a venv per tested release ($(RELEASES))"
	@echo "make test-quick - the same against $(CORE_RELEASES) only"
	@echo "make lint   - ruff"
	@echo "make matrix - the suite in the venv of every tested release, and a release x fix table"
	@echo "make check-new-release - the suite against any PyPI release newer than the table"

$(VENVS)/%/.built: envs/%.txt envs/common.txt tools/build_venv.sh
	tools/build_venv.sh $*

$(VENVS)/tools/.built:
	$(PYTHON) -m venv $(VENVS)/tools
	$(VENVS)/tools/bin/python -m pip -q --disable-pip-version-check install ruff build packaging
	touch $@

wheel: $(VENVS)/tools/.built
	rm -rf $(WHEEL_DIR)
	$(VENVS)/tools/bin/python -m build -q --wheel --outdir $(WHEEL_DIR) . >/dev/null

# Install this package's wheel (not editable) into the venv of one release.
install-%: $(VENVS)/%/.built wheel
	$(VENVS)/$*/bin/python -m pip -q --disable-pip-version-check install wrapt packaging
	$(VENVS)/$*/bin/python -m pip -q --disable-pip-version-check install --force-reinstall \
		--no-deps $(WHEEL_DIR)/*.whl

venvs: $(addprefix $(VENVS)/,$(addsuffix /.built,$(RELEASES)))

lint: $(VENVS)/tools/.built
	$(VENVS)/tools/bin/ruff check speculators_qwen_compat tests tools bench
	$(VENVS)/tools/bin/ruff format --check speculators_qwen_compat tests tools bench

# The whole matrix: every tested release, then a release x fix table.
test: matrix

test-quick: lint $(addprefix install-,$(CORE_RELEASES))
	@set -e; for r in $(CORE_RELEASES); do \
		echo "== speculators $$r"; \
		HF_HUB_OFFLINE=1 $(VENVS)/$$r/bin/python -P -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) tests; \
	done

matrix: lint $(addprefix install-,$(RELEASES))
	HF_HUB_OFFLINE=1 $(VENVS)/tools/bin/python tools/matrix.py $(RELEASES)

check-new-release: wheel
	HF_HUB_OFFLINE=1 $(VENVS)/tools/bin/python tools/check_new_release.py

support-table: $(VENVS)/tools/.built
	$(VENVS)/tools/bin/python tools/support_table.py

demo: install-$(DEMO_RELEASE)
	@rm -rf demo-output
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(VENVS)/$(DEMO_RELEASE)/bin/python -m speculators_qwen_compat.prepare_data \
		--model speculators_qwen_compat/demo/tiny-qwen36 \
		--data speculators_qwen_compat/demo/sample_openai.jsonl \
		--data speculators_qwen_compat/demo/sample_sharegpt.jsonl \
		--output demo-output --seq-length 512 --num-preprocessing-workers 2 2> demo-output.log \
		|| { tail -n 5 demo-output.log; exit 1; }
	@echo "output: $(CURDIR)/demo-output (log: demo-output.log)"

clean:
	rm -rf build demo-output demo-output.log

distclean: clean
	rm -rf $(VENVS)

# Ratios measured side by side in one run (bench/run_bench.py, a few minutes): prints the table,
# writes bench/RESULTS.md and the bench section of README.md.
bench: install-0.5.0 install-0.9.0
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(VENVS)/tools/bin/python bench/run_bench.py
