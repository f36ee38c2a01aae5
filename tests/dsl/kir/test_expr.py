"""Kernel-IR expressions (dsl/kir/expr.py): typed constructors, the verifier and the printer."""
import numpy as np
import pytest

import dsl
from dsl import kir


def test_constructors_type_their_nodes():
    x = kir.leaf(0, dsl.float16)
    assert x.dtype == "float32"  # float16 computes in float32
    y = kir.binary("mul", x, kir.const(2.0, "float32"))
    assert y.dtype == "float32" and kir.compare("lt", y, x).dtype == "bool"
    assert kir.leaf(1, dsl.int4).dtype == "int8" and kir.leaf(1, dsl.uint2).dtype == "uint8"
    assert kir.cast(y, dsl.float8e4m3fn).dtype == "float32"
    assert kir.cast(y, dsl.float32) is y  # nothing to round: the node itself
    assert kir.convert(kir.const(5, "int8"), "int64").dtype == "int64"


@pytest.mark.parametrize("build, message", [
    (lambda: kir.binary("add", kir.const(1, "int8"), kir.const(1.0, "float32")), "operand types differ"),
    (lambda: kir.unary("exp", kir.const(1, "int32")), "exp: needs a float"),
    (lambda: kir.unary("not", kir.const(1.0, "float32")), "not: needs bool"),
    (lambda: kir.binary("and", kir.const(1, "int8"), kir.const(1, "int8")), "and: needs bool"),
    (lambda: kir.binary("pow", kir.const(1, "int8"), kir.const(1, "int8")), "pow: computes in"),
    (lambda: kir.select(kir.const(1, "int8"), kir.const(1, "int8"), kir.const(1, "int8")), "condition is int8"),
    (lambda: kir.const(300, "int8"), "does not fit in int8"),
    (lambda: kir.call("quantize_to_int", kir.const(1.0, "float32")), "quantize_to_int: arguments"),
    (lambda: kir.compare("like", kir.const(1, "int8"), kir.const(1, "int8")), "unknown comparison"),
])
def test_malformed_nodes_are_ir_errors(build, message):
    with pytest.raises(kir.IRError, match=message):
        build()


def test_verifier_rechecks_nodes_built_by_hand():
    a, b = kir.const(1.0, "float32"), kir.const(2.0, "float32")
    kir.verify([kir.binary("add", a, b)])
    with pytest.raises(kir.IRError, match="dtype float64 is not what its operands give"):
        kir.verify([kir.Binary("float64", "add", a, b)])
    with pytest.raises(kir.IRError, match="operand types differ"):
        kir.verify([kir.Binary("float32", "add", a, kir.const(1, "int8"))])


def test_printer_shows_each_shared_node_once():
    x = kir.leaf(0, dsl.float32)
    square = kir.binary("mul", x, x)
    text = kir.format_exprs([kir.binary("add", square, square), kir.cast(square, dsl.bfloat16)])
    assert text.splitlines() == [
        "%0: float32 = leaf 0 (float)", "%1: float32 = mul %0, %0", "%2: float32 = add %1, %1",
        "%3: float32 = cast %1 to bfloat16 saturate=1 round=up", "return %2, %3"]


def test_postorder_is_iterative_for_deep_dags():
    node = kir.leaf(0, dsl.float32)
    for _ in range(20_000):
        node = kir.unary("neg", node)
    assert len(kir.postorder([node])) == 20_001


def test_constants_keep_exact_values():
    assert kir.const(np.float32(0.1), "float32").value == float(np.float32(0.1))
    assert np.isnan(kir.const(np.nan, "float64").value)
    assert kir.const(2 ** 64 - 1, "uint64").value == 2 ** 64 - 1
