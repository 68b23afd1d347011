# The two commands of the README: `make demo` (the main job) and `make test` (the whole suite).
# Every target that runs code first creates/updates .venv (scripts/setup_venv.sh, idempotent).

VENV := .venv
PYTEST_ARGS ?=

# Extra venvs beside .venv (scripts/setup_extra_venv.sh, idempotent, pinned by
# requirements/extra-venvs/constraints-<name>.txt): ROS 2 Jazzy on Python 3.12, and the ROS-free
# package on Python 3.10 and 3.13. See docs/distros.md.
EXTRA_VENVS := jazzy py310 py313
CLI_CHECK := run --image data/example_tabletop.png --query "the leftmost blue object" \
	-p llm.backend:=offline -p segmenter.backend:=color

.PHONY: setup demo demo-follow test test-fast lint bench clean distclean
.PHONY: test-main test-distros setup-extra $(addprefix setup-,$(EXTRA_VENVS))
.PHONY: $(addprefix test-,$(EXTRA_VENVS)) demo-jazzy

setup:
	scripts/setup_venv.sh

demo: setup
	scripts/demo.sh

# Follow mode on the moving sample bag (IoU per frame, 3D error, lost/stopped).
demo-follow: setup
	scripts/demo_follow.sh

# The whole suite, including the real SAM 3 model on CPU (slow_sam3, minutes), and the other
# ROS 2 distros and Pythons (test-distros). Every venv is set up first, one after the other (each
# installs this folder in editable mode); then test-main and test-distros run side by side, two
# jobs, each target's output printed whole when it ends (-O). The suite holds beside another run
# of itself (own DDS domain per run: CONTRIBUTING.md). `make -k test` (CI) runs every part even
# if one fails.
test: setup setup-extra
	$(MAKE) --no-print-directory -j2 -O test-main test-distros

# The console's browser tests need Chromium: scripts/setup_browser.sh installs it when missing.
test-main: setup
	scripts/setup_browser.sh
	$(VENV)/bin/pytest --durations=15 $(PYTEST_ARGS)

test-distros: test-jazzy test-py310 test-py313

setup-extra: $(addprefix setup-,$(EXTRA_VENVS))

$(addprefix setup-,$(EXTRA_VENVS)): setup-%:
	scripts/setup_extra_venv.sh $*

# ROS 2 Jazzy (rclpy 7, Fast DDS 2.14, Python 3.12): every test marked `ros`, then the demo.
test-jazzy: setup-jazzy
	.venv-jazzy/bin/pytest -m "ros and not torch and not slow_sam3" $(PYTEST_ARGS)
	.venv-jazzy/bin/sam3-agent demo --out out/demo-jazzy

demo-jazzy: setup-jazzy
	.venv-jazzy/bin/sam3-agent demo --out out/demo-jazzy

# The ROS-free package (no rclpy, no torch) on Python 3.10 and 3.13: the tests that need neither
# (pytest --ros-free, see test/conftest.py), then one CLI query with the offline backends.
test-py310 test-py313: test-%: setup-%
	.venv-$*/bin/pytest --ros-free -m "not slow_sam3" $(PYTEST_ARGS)
	@mkdir -p out/cli-$*
	.venv-$*/bin/sam3-agent $(CLI_CHECK) --out out/cli-$* >out/cli-$*/result.json \
		2>out/cli-$*/log.txt || { cat out/cli-$*/log.txt; false; }
	@echo "$*: sam3-agent run with the offline backends: OK (out/cli-$*/result.json)"

test-fast: setup
	scripts/setup_browser.sh
	$(VENV)/bin/pytest --durations=15 -m "not slow_sam3 and not slow_docs" $(PYTEST_ARGS)

# ruff, the type checker (mypy, [tool.mypy] in pyproject.toml: the whole package, strict on core/
# and pipeline/; its cache is .mypy_cache), then the layers of the package (import-linter
# contracts in pyproject.toml, docs/ARCHITECTURE.md): no module imports from a layer above its
# own, no import cycle.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

bench: setup
	bench/run_all.sh

clean:
	rm -rf out build install log .pytest_cache .ruff_cache .mypy_cache *.egg-info
	find . -path './$(VENV)*' -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(addprefix $(VENV)-,$(EXTRA_VENVS))
