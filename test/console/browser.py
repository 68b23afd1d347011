"""Headless Chromium under Selenium for the console's tests: Debian's ``chromium`` and
``chromium-driver`` (scripts/setup_browser.sh installs them), controls found by what a screen
reader reads (``accessible_name`` and ``aria_role``)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = ("/usr/bin/chromium", "chromium")
CHROMEDRIVER = ("/usr/bin/chromedriver", "chromedriver")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--window-size=1280,900")
# Chromium's role names for what ARIA calls img (newer versions say "image").
ROLE_ALIASES = {"img": ("img", "image")}
CANDIDATES = "input, button, img, section, [role], select"


def find(names: tuple[str, ...]) -> str | None:
    for name in names:
        path = shutil.which(name) if "/" not in name else (name if Path(name).exists() else None)
        if path:
            return path
    return None


def missing() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (requirements/dev.txt)"
    if find(CHROMIUM) is None or find(CHROMEDRIVER) is None:
        return "no chromium / chromedriver (scripts/setup_browser.sh installs them)"
    return None


def start_browser(profile_dir: str | None = None) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = find(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir or tempfile.mkdtemp(prefix='chromium-')}")
    return webdriver.Chrome(options=options, service=Service(find(CHROMEDRIVER)))


def by_name(driver: Any, role: str, name: str) -> Any:
    """The element whose accessible role and name are ``role`` and ``name`` (exactly one)."""
    from selenium.webdriver.common.by import By

    roles = ROLE_ALIASES.get(role, (role,))
    found = [e for e in driver.find_elements(By.CSS_SELECTOR, CANDIDATES)
             if e.aria_role in roles and e.accessible_name == name]
    assert len(found) == 1, f"{len(found)} elements with role {role} and name {name!r}"
    return found[0]
