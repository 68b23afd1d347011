"""What the section builders of bench/report.py share: ``Section`` (a doc section and its summary
figures) and ``verdict``."""

from __future__ import annotations


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


class Section:
    def __init__(self, title: str):
        self.lines = [f"### {title}", ""]
        self.summary: list[tuple[str, str, str, str]] = []  # figure, value, target, status

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def figure(self, name: str, value: str, target: str = "", ok: bool | None = None) -> None:
        self.summary.append((name, value, target, "" if ok is None else verdict(ok)))
