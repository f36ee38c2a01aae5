"""Test-suite scope: the full sweeps, or every pair of their parameter values.

A test marked ``@pytest.mark.sweep`` is a full factorial of its parameters (every version x type
x axis x ...), and each case compiles kernels of its own: hundreds of seconds a file on a cold
cache. By default (and in CI) it runs a covering subset instead: cases chosen greedily until
every pair of values of any two of its parameters appears in at least one, in collection order
(the same cases in every pytest-xdist worker), and every combination a single decorator lists.
Every single value, and every interaction of two, is still exercised. ``DSL_FULL_SWEEPS=1`` runs every case (the conformance file reads it too).
"""
from __future__ import annotations

import itertools
import os
import re

import pytest

FULL_SWEEPS = os.environ.get("DSL_FULL_SWEEPS", "") not in ("", "0")


def pytest_configure(config):
    config.addinivalue_line("markers", "sweep: a full factorial of its parameters; pairwise-covered unless "
                                       "DSL_FULL_SWEEPS=1 (tests/conftest.py)")


def _stable(value) -> str:
    """A parameter value's name, the same in every process (no object addresses)."""
    name = getattr(value, "__name__", None)
    text = name if isinstance(name, str) else repr(value)
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def _parameters(item) -> list[tuple]:
    """(names, values) of each parametrize decorator of a case: the names one decorator binds
    together (``"bits, signed, table"``) are one parameter, whose values are their tuples."""
    found = []
    for mark in item.iter_markers("parametrize"):
        names = mark.args[0]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        names = [n for n in names if n in item.callspec.params]
        if names:
            found.append((tuple(names), tuple(_stable(item.callspec.params[n]) for n in names)))
    return sorted(found)


def pairwise_cover(items: list) -> list:
    """A subset of ``items`` (parametrized cases of one test function) holding every pair of
    values of any two parameters, and every combination one decorator lists (a version with each
    type it allows), that any case holds; chosen greedily (most new ones first, ties by
    collection order)."""
    def pairs(item) -> set:
        groups = _parameters(item)
        single = sorted((name, value) for names, values in groups for name, value in zip(names, values))
        return set(itertools.combinations(single, 2)) | {group for group in groups if len(group[0]) > 1} or {tuple(single)}
    todo = [(index, pairs(item)) for index, item in enumerate(items)]
    uncovered = set().union(*(p for _, p in todo)) if todo else set()
    chosen = []
    while uncovered:
        index, best = max(todo, key=lambda entry: (len(entry[1] & uncovered), -entry[0]))
        chosen.append(index)
        uncovered -= best
    return [items[index] for index in sorted(chosen)]


def pytest_collection_modifyitems(config, items):
    if FULL_SWEEPS:
        return
    groups: dict = {}
    for item in items:
        if item.get_closest_marker("sweep") is not None and hasattr(item, "callspec"):
            groups.setdefault((item.path, item.originalname), []).append(item)
    keep = {id(item) for group in groups.values() for item in pairwise_cover(group)}
    dropped = [item for group in groups.values() for item in group if id(item) not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        dropped_ids = {id(item) for item in dropped}
        items[:] = [item for item in items if id(item) not in dropped_ids]
