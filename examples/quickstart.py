"""Quickstart: ONNX Unsqueeze at several opsets, an attention-mask model, zero-copy packed int4."""
import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

import dsl

# 1. Unsqueeze is a view: numpy in, numpy VIEW out.
scores = np.arange(6, dtype=np.float32).reshape(2, 3)
expanded = dsl.unsqueeze(scores, [0, -1])
print("unsqueeze [0, -1]:", scores.shape, "->", expanded.shape,
      "| shares memory:", np.shares_memory(scores, expanded))

# 2. The opset decides the rules: negative axes need opset >= 11, bfloat16 needs 13,
#    float8 needs 21, int2 needs 25.
for opset, data, axes in [(1, scores, [-1]), (11, scores, [-1]),
                          (11, scores.astype(ml_dtypes.bfloat16), [0]),
                          (13, scores.astype(ml_dtypes.bfloat16), [0]),
                          (13, scores.astype(ml_dtypes.float8_e4m3fn), [0]),
                          (21, scores.astype(ml_dtypes.float8_e4m3fn), [0])]:
    try:
        out = dsl.unsqueeze(data, axes, opset=opset)
        print(f"opset {opset:2d} {dsl.dtype(data.dtype).onnx_name:>12} axes {axes}: ok {out.shape}")
    except dsl.DslError as err:
        print(f"opset {opset:2d} {dsl.dtype(data.dtype).onnx_name:>12} axes {axes}: DslError: {err}")

# 3. The tiny-LLM attention-mask pattern as an ONNX model: mask [B, S] -> [B, 1, 1, S].
graph = helper.make_graph(
    [helper.make_node("Unsqueeze", ["mask", "axes"], ["mask_4d"], name="mask_4d")],
    "attention_mask",
    [helper.make_tensor_value_info("mask", TensorProto.INT64, ["B", "S"])],
    [helper.make_tensor_value_info("mask_4d", TensorProto.INT64, ["B", 1, 1, "S"])],
    [helper.make_tensor("axes", TensorProto.INT64, [2], [1, 2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
onnx.checker.check_model(model)
program = dsl.from_onnx(model.SerializeToString())
print(program)
print("inferred output type:", program.output_types[0])
mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=np.int64)
(mask_4d,) = program.run({"mask": mask})
print("mask_4d", mask_4d.shape, "| view of the feed:", np.shares_memory(mask, mask_4d))

# 4. Packed int4 weights (ONNX raw layout, two per byte) unsqueezed without a copy.
raw = np.array([0x21, 0x43, 0x65, 0x87], dtype=np.uint8)      # int4 values 1 2 3 4 5 6 7 -8
weights = dsl.Tensor.from_packed(raw, "int4", (2, 4))
row_major = dsl.unsqueeze(weights, [1])
print("int4 weights", weights.shape, "->", row_major.shape, "| same buffer:", row_major.buffer is raw)
print(row_major.numpy())
