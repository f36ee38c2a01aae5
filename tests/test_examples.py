"""The examples run to completion: the JIT ones check their fused results against numpy
themselves, the quickstart's printout is checked here (examples/dask_dequant.py, which writes a
128 MiB file, is covered by tests/dsl/dask)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", ["quickstart", "tiny_llm_attention", "int4_weights", "float8_kv_cache", "rope_kv_cache"])
def test_example_runs_and_its_checks_pass(name):
    done = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py")], capture_output=True, text=True,
                          timeout=300, cwd=EXAMPLES.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    if name == "quickstart":  # the demo prints what it shows: the views and the opset rules
        out = done.stdout
        assert "shares memory: True" in out and "view of the feed: True" in out and "same buffer: True" in out
        assert "opset  1        float axes [-1]: DslError" in out and "opset 11        float axes [-1]: ok" in out
        assert "opset 13 float8e4m3fn axes [0]: DslError" in out and "opset 21 float8e4m3fn axes [0]: ok" in out


def test_tiny_llm_decoder_agrees_token_for_token():
    """The int4 decoder's three implementations (dsl's JIT, dsl's numpy engine, plain numpy)
    generate the same tokens, and so does its whole decode step exported to ONNX and run by
    dsl.from_onnx (the example asserts it; a short run here)."""
    done = subprocess.run([sys.executable, str(EXAMPLES / "tiny_llm_decoder.py"), "--tokens", "6"],
                          capture_output=True, text=True, timeout=600, cwd=EXAMPLES.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "6 tokens, identical from dsl's JIT, dsl's numpy engine and plain numpy" in done.stdout
    # the whole decoder exported as one ONNX model: dsl.from_onnx decodes the JIT's tokens (asserted there)
    assert "dsl.from_onnx gave the JIT's 6 tokens" in done.stdout, done.stdout[-2000:]
