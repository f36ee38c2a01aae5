"""Fixtures shared by the tests under tests/dsl.

Being a conftest.py outside any package, this file also puts tests/dsl on sys.path (pytest's "prepend" import
mode), which is what makes ``dsl_test_helpers`` importable from the test files in tests/dsl's subfolders.
"""
from __future__ import annotations

import threading

import pytest

from dsl.codegen import compile as codegen_compile

pytest.register_assert_rewrite("dsl_test_helpers")  # full assertion messages from the shared helpers


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
