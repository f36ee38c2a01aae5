"""Fixtures shared by the tests under tests/dsl.

Being a conftest.py outside any package, this file also puts tests/dsl on sys.path (pytest's "prepend" import
mode), which is what makes ``dsl_test_helpers`` importable from the test files in tests/dsl's subfolders.
"""
from __future__ import annotations

import threading

import pytest

from dsl import runtime
from dsl.codegen import compile as codegen_compile

pytest.register_assert_rewrite("dsl_test_helpers")  # full assertion messages from the shared helpers

TEST_PARALLEL_THRESHOLD = 1 << 16  # (elements)


@pytest.fixture(autouse=True)
def threads_from_test_sizes(monkeypatch):
    """Kernels of 64K+ elements run threaded in these tests, as they did by default before the
    default rose to 4M (a pool hand-off costs about 60 us here): test-sized inputs still cover
    thread spans, partial reductions and their combines. A test may set its own threshold."""
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", TEST_PARALLEL_THRESHOLD)


@pytest.fixture
def counted_imports(monkeypatch) -> list[str]:
    """The file names of the generated kernels codegen imports during the test, in order (thread-safe)."""
    imports, lock = [], threading.Lock()
    real_import = codegen_compile._import

    def counting_import(path, name):
        with lock:
            imports.append(path.name)
        return real_import(path, name)

    monkeypatch.setattr(codegen_compile, "_import", counting_import)
    return imports
