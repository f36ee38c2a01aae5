"""Partition a specialized graph into execution steps: fused kernels, views and fallbacks.

Rules: a value is materialized when it is a graph output or feeds a node that cannot be
fused; each materialized value produced by fusable nodes becomes one kernel over its cone
of elementwise and view nodes (views pushed down to the leaves). Last-axis reductions and
Softmax are row kernels over their input's cone; a row op whose result only feeds a chain
of same-shape elementwise ops runs that chain in its kernel too (an epilogue). A cone without any
elementwise node is just a view chain and costs nothing. Everything else runs its numpy
reference (strings, complex, ops without a kernel lowering).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import kir
from ..kir import types as kir_types
from ..kir.group import Group, GroupBuilder, Unfusable
from ..ir import Graph, Node, TensorType, Value
from ..ops import registry
from ..ops.lowering import Concatenation, Elementwise, Gathering, Row


@dataclass
class NodeStep:
    """Run one node with its numpy reference (views stay views; packed Tensors stay packed
    through view ops)."""

    node: Node
    call: object
    opdef: object


@dataclass
class KernelStep:
    """Run one fused kernel group; ``row``, a list of (node, call, kind), makes it last-axis
    reductions (or one softmax) of the group's single sink, written to the nodes' outputs."""

    group: Group
    row: list | None = None


@dataclass
class ReduceStep(KernelStep):
    """A reduction (or softmax) over any axes, ``row`` = [(node, call, kind)], with the cone that
    produces its input fused in: the any-axis schedule (dsl/kir/reduce_schedule.py)."""


@dataclass
class StagedStep(KernelStep):
    """A group whose cone holds reductions of its own values (``group.stages``: layer norm's mean
    and variance), computed in the kernel before its outputs: the staged schedule
    (dsl/kir/reduce_schedule.py staged_kernel)."""


class _Unstage(Exception):
    """A staged reduction that cannot share its group's kernel (its axes differ from another
    stage's there): partition again with it as a kernel of its own."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


STAGE_KINDS = ("sum", "mean", "max", "min")


def _tensor_ok(value: Value | None) -> bool:
    return value is None or isinstance(value.type, TensorType) and kir_types.supported(value.type.dtype)


def _static(value: Value | None) -> bool:
    """A value whose shape is known before the run (not a data-dependent one: NonZero's count)."""
    return value is None or value.type.shape is not None and all(isinstance(d, int) for d in value.type.shape)


def _fusable(node: Node, call, opdef, unfused: set = frozenset()) -> bool:
    if not all(_tensor_ok(v) and _static(v) for v in list(node.inputs) + list(node.outputs)):
        return False
    if opdef.view is not None and len(node.outputs) == 1:
        return call.plan is not None
    if isinstance(opdef.kernel, (Concatenation, Gathering)):  # (guarded loads; loads through loaded indices)
        return opdef.kernel.fusable(call) and node.outputs[0].name not in unfused
    return isinstance(opdef.kernel, Elementwise) and opdef.kernel.fusable(call) and len(node.outputs) == 1


def _picks(group: Group) -> list:
    """Names of the concatenations fused into ``group`` (kir Pick nodes)."""
    roots = list(group.outputs) + [stage.value for stage in group.stages]
    if group.epilogue is not None:
        roots += group.epilogue.outputs
    return [node.name for node in kir.postorder(roots) if isinstance(node, kir.Pick)]


def _check_picks(steps: list) -> list:
    """Only plain elementwise kernels take fused concatenations and gathers (their schedule
    lowers them into guarded loads and loads through loaded indices); another kernel's are
    computed on their own (Unfusable)."""
    for step in steps:
        if isinstance(step, KernelStep) and (type(step) is not KernelStep or step.row or step.group.epilogue):
            names = _picks(step.group)
            if names:
                raise Unfusable(names[0])
            if step.group.checks:
                raise Unfusable(step.group.checks[0].node.outputs[0].name, apart=True)
    return steps


def _gathered(graph: Graph, fusable: dict) -> set:
    """The data and indices of fused gathers: read from memory (the indices are checked there
    before the kernel runs; the data is read at loaded offsets)."""
    found = set()
    for node in graph.nodes:
        if fusable[id(node)] and isinstance(registry.get(node.op_type, node.name, node.domain).kernel, Gathering):
            found.update(v.name for v in node.inputs[:2])
    return found


def _row_kernel(node: Node, call, opdef) -> bool:
    """A last-axis reduction / softmax whose producer cone can be fused into it. An integer
    mean of 64-bit values stays on the reference: its int64 row sum could wrap."""
    if isinstance(opdef.kernel, Row) and opdef.kernel.kind == "mean" and \
            node.inputs[0].type.dtype.onnx_name in ("int64", "uint64"):
        return False
    return isinstance(opdef.kernel, Row) and opdef.kernel.fusable(call) and \
        all(_tensor_ok(v) and _static(v) for v in list(node.inputs[:1]) + list(node.outputs)) and \
        node.inputs[0].type.shape is not None and len(node.inputs[0].type.shape) >= 1


def _any_axis_kernel(node: Node, call, opdef) -> bool:
    """A reduction or softmax the any-axis schedule runs: its Row lowering names the axes, all
    sizes are static and nothing is empty (else its reference runs). An integer mean of 64-bit
    values stays on the reference: its int64 sum could wrap."""
    lowering = opdef.kernel
    if not isinstance(lowering, Row) or lowering.axes is None or lowering.fusable(call):
        return False
    axes = lowering.axes(call)
    shape = node.inputs[0].type.shape if isinstance(node.inputs[0].type, TensorType) else None
    if not axes or shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
        return False
    if lowering.kind == "mean" and node.inputs[0].type.dtype.onnx_name in ("int64", "uint64"):
        return False
    return all(_tensor_ok(v) for v in list(node.inputs[:1]) + list(node.outputs))


def partition(graph: Graph, calls: dict, constants: dict) -> list:
    """Steps in execution order for a graph whose types are all concrete."""
    unstaged: set = set()
    unfused: set = set()
    apart: set = set()  # gathers computed by plain kernels of their own (Unfusable(apart=True))
    while True:
        try:
            return _check_picks(_partition(graph, calls, constants, unstaged, unfused, apart))
        except _Unstage as found:
            unstaged.add(found.name)
        except Unfusable as found:  # (a gather: first a kernel of its own, then its reference)
            (apart if found.apart and found.name not in apart else unfused).add(found.name)


def _partition(graph: Graph, calls: dict, constants: dict, unstaged: set, unfused: set, apart: set) -> list:
    producer = {}
    fusable = {}
    needed = {v.name for v in graph.outputs}
    for node in graph.nodes:
        opdef = registry.get(node.op_type, node.name, node.domain)
        fusable[id(node)] = _fusable(node, calls[id(node)], opdef, unfused)
        for value in node.outputs:
            producer[value.name] = (node, calls[id(node)], opdef)
    rows = {id(n) for n in graph.nodes
            if _row_kernel(n, calls[id(n)], registry.get(n.op_type, n.name, n.domain))}
    any_axis = {id(n) for n in graph.nodes if id(n) not in rows
                and _any_axis_kernel(n, calls[id(n)], registry.get(n.op_type, n.name, n.domain))}
    for node in graph.nodes:
        if not fusable[id(node)]:
            fused_input = id(node) in rows or id(node) in any_axis
            needed.update(v.name for v in node.inputs[1 if fused_input else 0:] if v is not None)
    # reductions read only by elementwise ops of their input's shape compute inside the kernels of
    # those ops' results (stages): layer norm is one kernel
    staged = _staged([n for n in graph.nodes if (id(n) in rows or id(n) in any_axis) and n.outputs[0].name not in
                      unstaged], fusable, producer, needed)
    staged_ids = {id(found[0]) for found in staged.values()}
    rows -= staged_ids
    any_axis -= staged_ids
    cuts = set(needed)
    cones = _bound_cones(graph, fusable, needed)
    cuts = needed - cuts  # values materialized only to bound kernels: later kernels read them
    gathered = _gathered(graph, fusable) | apart
    needed |= gathered
    cuts |= gathered
    # a row node whose result only feeds a chain of same-shape elementwise ops computes them in
    # its kernel (an epilogue): that kernel is made where the chain's last value is needed
    row_groups = _row_groups([n for n in graph.nodes if id(n) in rows], producer)
    epilogue_of = _epilogues(graph, row_groups, fusable, producer, needed)
    with_epilogue = {id(row) for row in epilogue_of.values()}
    needed.update(epilogue_of)
    # graph outputs nothing else reads wait until the end, where those of one shape share a kernel
    late = {v.name for v in graph.outputs} - {v.name for n in graph.nodes if not fusable[id(n)]
                                               for v in n.inputs if v is not None} - set(epilogue_of)
    fused_producer = {name: found for name, found in producer.items() if fusable[id(found[0])]}
    builder = GroupBuilder(fused_producer, constants, kept=set(epilogue_of) | cuts, staged=staged, apart=apart)
    steps, done, deferred = [], set(), {}  # deferred: output name -> (its step index, value)
    for node in graph.nodes:
        if id(node) in staged_ids:
            continue  # computed in the kernels that read it
        if id(node) in any_axis:
            kind = producer[node.outputs[0].name][2].kernel.kind
            steps.append(ReduceStep(builder.build([node.inputs[0]], True), [(node, calls[id(node)], kind)]))
            continue
        if id(node) in rows:
            if id(node) in with_epilogue:
                continue  # built with its epilogue, below
            together = row_groups.get(id(node))
            if together:  # the first of reductions over one value: one pass feeds them all
                steps.append(KernelStep(builder.build([node.inputs[0]], True),
                                        [(n, calls[id(n)], producer[n.outputs[0].name][2].kernel.kind)
                                         for n in together]))
            continue
        if not fusable[id(node)]:
            if all(v.name in constants for v in node.outputs):
                continue  # (a Constant, or a node folded at trace time: the value is there)
            steps.append(NodeStep(node, calls[id(node)], producer[node.outputs[0].name][2]))
            continue
        for value in node.outputs:
            if value.name in needed and value.name not in done:
                done.add(value.name)
                row = epilogue_of.get(value.name)
                if row is not None:
                    group = builder.build_row(row.inputs[0], row.outputs[0], [value])
                    kind = producer[row.outputs[0].name][2].kernel.kind
                    steps.append(KernelStep(group, [(row, calls[id(row)], kind)]))
                    continue
                produced = _materialize(value, fused_producer, builder, needed)
                if value.name in late and len(produced) == 1 and isinstance(produced[0], KernelStep):
                    deferred[value.name] = (len(steps), value)
                steps += produced
    return [_with_stages(step) for step in _group_outputs(steps, deferred, builder, cones)]


def _with_stages(step):
    """A kernel step whose group computes stages as a StagedStep (all its stages over one set of
    axes, else _Unstage: the later one runs as a kernel of its own)."""
    if not isinstance(step, KernelStep) or not step.group.stages:
        return step
    if type(step) is not KernelStep or step.row or step.group.epilogue is not None:  # (a row kernel's epilogue)
        raise _Unstage(step.group.stages[0].node.outputs[0].name)
    first = step.group.stages[0].axes
    for stage in step.group.stages[1:]:
        if stage.axes != first:
            raise _Unstage(stage.node.outputs[0].name)
    return StagedStep(step.group)


def _staged(candidates: list, fusable: dict, producer: dict, needed: set) -> dict:
    """{result name: (node, call, opdef)} of the reductions that become stages of the kernels
    reading them: a sum / mean / max / min whose result keeps the reduced axes as 1, is not needed
    (no graph output, no reader outside kernels) and reaches kernels only through elementwise
    ops of its input's shape (each such value read by more of them, needed, or by another staged
    reduction over the same axes) or of its result's shape (rstd = 1 / sqrt(var + eps): not
    needed, computed where read). A stage is then always read broadcast back along its axes, at
    the kernel's own index."""
    found = {}
    for node in candidates:
        entry = producer[node.outputs[0].name]
        plan, kind = entry[1].plan, entry[2].kernel.kind
        shape, out = node.inputs[0].type.shape, node.outputs[0]
        if kind not in STAGE_KINDS or out.name in needed or plan is None or not plan.axes or \
                tuple(out.type.shape) != tuple(1 if k in plan.axes else d for k, d in enumerate(shape)):
            continue
        found[out.name] = entry
    changed = True
    while changed:
        changed = False
        for name, (node, call, _) in list(found.items()):
            if not _stage_readers_ok(node, call, found, fusable, producer, needed):
                del found[name]
                changed = True
    return found


def _stage_readers_ok(node, call, found, fusable, producer, needed) -> bool:
    shape, axes = tuple(node.inputs[0].type.shape), tuple(call.plan.axes)
    per_row = tuple(node.outputs[0].type.shape)
    stack, seen = [node.outputs[0]], set()
    while stack:
        value = stack.pop()
        for reader in value.users:
            result = reader.outputs[0].name if reader.outputs else None
            if result in found:
                other = found[result]
                if other[0].inputs[0] is not value or tuple(other[1].plan.axes) != axes or \
                        tuple(other[0].inputs[0].type.shape) != shape:
                    return False
                continue
            at = tuple(reader.outputs[0].type.shape) if fusable[id(reader)] else None
            if not fusable[id(reader)] or producer[result][2].view is not None or \
                    at not in (shape, per_row) or at == per_row != shape and result in needed:
                return False  # (a value of the reduced shape is computed per element where it is read)
            if result not in needed and result not in seen:
                seen.add(result)
                stack.append(reader.outputs[0])
    return True


def _epilogues(graph: Graph, row_groups: dict, fusable: dict, producer: dict, needed: set) -> dict:
    """{name of the last value of an epilogue chain: its row node (one alone in its row kernel:
    a softmax, or the only reduction of its input)}. The chain follows the row result through
    elementwise nodes of the same shape (or, straight from a last-axis reduction kept as
    [..., 1], of its input's shape: see _broadcast_back), each value read by exactly one node,
    and ends at a graph output, a value needed anyway, or the last such node."""
    outputs = {v.name for v in graph.outputs}
    found = {}
    for node in graph.nodes:
        if len(row_groups.get(id(node)) or ()) != 1:  # not a row node, or sharing its pass
            continue
        value, shape, sink = node.outputs[0], node.outputs[0].type.shape, None
        # a last-axis reduction kept as [..., 1] may also feed ops of its input's shape (x - max(x)):
        # its result is constant along the row, so they compute in a second pass over the row
        full, went_full = _broadcast_back(node, producer), False
        while value.name not in outputs and (sink is None or value.name not in needed):
            after = value.users
            if len(after) != 1 or not fusable[id(after[0])] or producer[after[0].outputs[0].name][2].view is not None \
                    or after[0].outputs[0].type.shape not in (shape, full):
                break
            if full is not None and after[0].outputs[0].type.shape == full:
                if sink is not None:  # (only the result itself broadcasts back: per-row ops keep their kernel)
                    break
                shape, full, went_full = full, None, True  # (the chain stays at the input's shape)
            sink = value = after[0].outputs[0]
        if went_full and sink.name not in outputs and sink.name not in needed:
            # a full-shape chain pays off only where its end is written anyway: a value its readers
            # would recompute in their kernels would be materialized instead (layer norm's x - mean)
            sink = None
        if sink is not None:
            found[sink.name] = node
    return found


def _broadcast_back(node: Node, producer: dict):
    """The input shape of a reduction over the last axis whose result keeps that axis as 1 (so
    broadcasting it against the input repeats it along each row), else None."""
    if producer[node.outputs[0].name][2].kernel.kind in ("softmax", "logsoftmax"):
        return None
    shape, full = node.outputs[0].type.shape, node.inputs[0].type.shape
    if shape is None or full is None or len(shape) != len(full) or not full or full[-1] == 1 or \
            tuple(shape[:-1]) != tuple(full[:-1]) or shape[-1] != 1:
        return None
    return full


def _row_groups(row_nodes: list, producer: dict) -> dict:
    """id(first node) -> the row nodes reducing the same value (softmax stays alone); later
    members map to an empty list: their kernel is the first one's."""
    groups, by_input = {}, {}
    for node in row_nodes:
        kind = producer[node.outputs[0].name][2].kernel.kind
        key = node.inputs[0].name if kind not in ("softmax", "logsoftmax") else id(node)
        if key in by_input:
            groups[by_input[key]].append(node)
            groups[id(node)] = []
        else:
            by_input[key] = id(node)
            groups[id(node)] = [node]
    return groups


def _group_outputs(steps: list, deferred: dict, builder: GroupBuilder, cones: dict) -> list:
    """Graph outputs of one shape computed by ONE kernel at the end (it reads each input once,
    computes shared producers once and writes every output of that shape), up to
    MAX_KERNEL_OUTPUTS outputs and MAX_KERNEL_NODES nodes a kernel. An output a view step reads
    keeps its own kernel, in order."""
    read = {v.name for step in steps if isinstance(step, NodeStep) for v in step.node.inputs if v is not None}
    moved = {index: value for index, value in deferred.values() if value.name not in read}
    by_shape: dict = {}
    for value in moved.values():
        by_shape.setdefault(value.type.shape, []).append(value)
    kept = [step for index, step in enumerate(steps) if index not in moved]
    for values in by_shape.values():
        batch, nodes = [], set()
        for value in values:
            cone = cones.get(value.name, set())
            if batch and (len(batch) == MAX_KERNEL_OUTPUTS or len(nodes | cone) > MAX_KERNEL_NODES):
                kept.append(KernelStep(builder.build(batch)))
                batch, nodes = [], set()
            batch.append(value)
            nodes |= cone
        kept.append(KernelStep(builder.build(batch)))
    return kept


# A kernel computes at most this many distinct nodes (elementwise and view) and writes at most
# this many outputs: beyond that a value in between is materialized. Generated source, the code
# generator's recursion and LLVM's time all grow with a kernel (a 400-op chain compiled for 22 s
# as one kernel; 500 same-shape outputs took 64 s and 1.4 GB), while a cut costs one write and
# one read of the cut value.
MAX_KERNEL_NODES = 96
MAX_KERNEL_OUTPUTS = 16


def _bound_cones(graph: Graph, fusable: dict, needed: set) -> dict:
    """Mark values ``needed`` so that no kernel's cone exceeds MAX_KERNEL_NODES nodes.

    In topological order each fusable node's cone is itself plus the cones of its inputs that
    are fused into it (produced by fusable nodes and not needed); while a cone is too large,
    the input with the largest cone is cut (materialized). Returns {value name: its cone, a set
    of node ids}."""
    cones: dict = {}
    for node in graph.nodes:
        if not fusable[id(node)]:
            continue
        inputs = [v.name for v in node.inputs if v is not None and v.name in cones and v.name not in needed]
        cone = {id(node)}.union(*(cones[name] for name in inputs))
        while len(cone) > MAX_KERNEL_NODES and inputs:
            cut = max(inputs, key=lambda name: len(cones[name]))
            needed.add(cut)
            inputs.remove(cut)
            cone = {id(node)}.union(*(cones[name] for name in inputs))
        for value in node.outputs:
            cones[value.name] = cone
    return cones


def _materialize(value: Value, fused_producer: dict, builder: GroupBuilder, needed: set) -> list:
    """Steps producing ``value``: a view chain of NodeSteps (over an input, a reference result
    or a value materialized anyway, which precedes it), or one kernel."""
    chain, current = [], value
    while current.name in fused_producer and fused_producer[current.name][2].view is not None:
        node, call, opdef = fused_producer[current.name]
        chain.append(NodeStep(node, call, opdef))
        current = node.inputs[0]
        if current.name in needed:
            break
    if current.name not in fused_producer or current.name in needed and chain:
        return chain[::-1]
    return [KernelStep(builder.build([value]))]
