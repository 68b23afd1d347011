"""test/waiting.py: the tests' bounded wait returns once its condition holds and fails, naming
what it waited for, when the deadline passes."""

from __future__ import annotations

import itertools

import pytest

from test.waiting import wait_until


def test_wait_until_returns_once_the_condition_holds():
    polls = itertools.count(1)
    wait_until(lambda: next(polls) >= 3, "the third poll")
    assert next(polls) == 4  # polled exactly until it held


def test_wait_until_fails_after_its_deadline_and_names_what_it_waited_for():
    polls = itertools.count(1)
    with pytest.raises(AssertionError, match="timed out waiting for the impossible"):
        wait_until(lambda: next(polls) < 0, "the impossible", timeout=0.05)
    assert next(polls) > 2  # it polled on until the deadline (twice at the least)
