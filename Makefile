# The two commands of the README: `make demo` (the main job) and `make test` (the whole suite).
# Every target that runs code first creates/updates .venv (scripts/setup_venv.sh, idempotent).

VENV := .venv
PYTEST_ARGS ?=

.PHONY: setup demo test test-fast lint bench clean distclean

setup:
	scripts/setup_venv.sh

demo: setup
	scripts/demo.sh

# The whole suite, including the real SAM 3 model on CPU (slow_sam3, ~3 min).
test: setup
	$(VENV)/bin/pytest --durations=15 $(PYTEST_ARGS)

test-fast: setup
	$(VENV)/bin/pytest --durations=15 -m "not slow_sam3" $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	bench/run_all.sh

clean:
	rm -rf out build install log .pytest_cache .ruff_cache *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
