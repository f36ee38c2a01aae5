"""The op registry and every op family (importing this package registers them all)."""
from . import arith, cast, constant, quantize, shape, math, logic, minmax, bitwise, variadic, activations  # noqa: F401  (registration side effects)
from . import reduce, reduce_composite, matmul, gemm, matmul_integer, movement, indexing, selection, arrange, padding, scan, trig, rounding  # noqa: F401
from . import losses, dropout  # noqa: F401
from . import attention  # noqa: F401
from . import normalization, rotary  # noqa: F401
from . import linear_attention, causal_conv  # noqa: F401
from . import control_flow  # noqa: F401
from . import quant_matmul  # noqa: F401  (com.microsoft MatMulNBits; the internal DequantMatMul)
from . import gather_block_quantized  # noqa: F401  (com.microsoft GatherBlockQuantized)
from .registry import LATEST_OPSET, MIN_OPSET, OpDef, all_ops, get

__all__ = ["LATEST_OPSET", "MIN_OPSET", "OpDef", "all_ops", "get"]
