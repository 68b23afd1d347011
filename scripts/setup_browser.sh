#!/usr/bin/env bash
# The browser of the console's tests (test/console/): Debian's headless Chromium and its
# WebDriver (/usr/bin/chromium, /usr/bin/chromedriver), installed with apt-get when missing.
# Idempotent and quiet: nothing happens when both are there. Not root, or no apt-get: says why
# and exits 0 (the browser tests then skip, saying the same).
set -euo pipefail

if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    exit 0
fi
if [[ $(id -u) != 0 ]]; then
    echo "setup_browser: chromium / chromium-driver missing and not root: the browser tests" \
         "skip (as root: apt-get install chromium chromium-driver)" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "setup_browser: no apt-get here: install Chromium and chromedriver at" \
         "/usr/bin/chromium, /usr/bin/chromedriver for the browser tests" >&2
    exit 0
fi
echo "setup_browser: installing chromium and chromium-driver (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium \
        chromium-driver; } >/tmp/sam3_agent_setup_browser.log 2>&1; then
    echo "setup_browser: apt-get failed (log: /tmp/sam3_agent_setup_browser.log); the browser" \
         "tests skip" >&2
    tail -5 /tmp/sam3_agent_setup_browser.log >&2
fi
