"""Peak memory of a piece of code, measured in a fresh Python process.

``peak_rss_mb(code)`` runs ``code`` with ``sys.executable`` and returns the process's peak resident
set (``ru_maxrss``) in MiB, so tests can show that refusing a decompression bomb allocates nothing
big: compare with the same code run on a small image.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
_REPORT = """
import json as _json, resource as _resource
print("PEAK_RSS " + _json.dumps(_resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss / 1024))
"""


def peak_rss_mb(code: str, timeout_s: float = 120.0) -> tuple[float, str]:
    """``(peak RSS MiB, stdout)`` of ``code`` run in a new interpreter at the repository root."""
    proc = subprocess.run([sys.executable, "-c", code + "\n" + _REPORT], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PEAK_RSS "))
    return float(json.loads(line.split(" ", 1)[1])), proc.stdout
