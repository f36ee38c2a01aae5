"""The architecture's layering, checked on the source: no import cycle in dsl/ (every import
statement counted, those inside functions too), kernels/ never imports dsl, and the kernel IR
and the op definitions hold no numba: renderers alone know it."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules() -> dict[str, Path]:
    found = {}
    for top in ("dsl", "kernels"):
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module for alias in node.names]
        else:
            continue
        for target in names:
            while target and target not in known:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            if target and target != name:
                targets.add(target)
    return targets


def test_no_import_cycles_and_kernels_never_import_dsl():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert not [m for m in graph if m.startswith("kernels") and any(t.startswith("dsl") for t in graph[m])]
    state, cycles = {}, []

    def visit(start):  # iterative DFS: a back edge is a cycle
        stack = [(start, iter(sorted(graph[start])))]
        state[start], path = 1, [start]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                cycles.append(path[path.index(child):] + [child])
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph[child]))))

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert not cycles, cycles


def test_the_kernel_ir_and_the_ops_hold_no_numba():
    for folder in ("dsl/kir", "dsl/ops"):
        for path in (ROOT / folder).glob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                    assert not any(n.split(".")[0] in ("numba", "llvmlite") for n in names), path
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = node.value
                    assert not any(word in text for word in ("np.float32(", "np.int64(", "_bits.", "_vmath.",
                                                               "numba.njit")), (path, text[:80])


def test_no_op_name_comparisons_outside_the_op_definitions():
    """What an op does (its lowering, its chunk rule under dsl.dask, its view) is declared on its
    OpDef in dsl/ops/; nothing else compares op names (``node.op_type == "MatMul"``,
    ``opdef.name in (...)``)."""
    from dsl.ops import registry
    names = set(registry.all_ops())
    found = []
    for path in (ROOT / "dsl").rglob("*.py"):
        if path.relative_to(ROOT).parts[1] == "ops":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            for side in [node.left, *node.comparators]:
                values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                hits = [v.value for v in values if isinstance(v, ast.Constant) and v.value in names]
                if hits:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {hits}")
    assert not found, found


def test_one_bind_serves_the_trace_inference_and_both_engines():
    """Ops are checked and planned only through dsl.ops.registry.bind: no other module makes a
    Call or runs a rule itself."""
    found = []
    for path in (ROOT / "dsl").rglob("*.py"):
        if path.relative_to(ROOT).as_posix() == "dsl/ops/registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("make_call", "infer") and \
                    isinstance(node.ctx, ast.Load) and not (isinstance(node.value, ast.Name) and
                                                            node.value.id == "infer_shapes"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert not found, found
