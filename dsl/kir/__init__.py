"""The kernel IR: backend-neutral scalar expressions (expr.py) over compute-domain types
(types.py), a numpy interpreter that is its reference (interp.py). Op lowerings build it;
renderers (dsl/codegen for numba) turn it into code. Nothing here knows numba."""
from . import types
from .expr import (CALLS, Binary, Call, Cast, Compare, Const, Convert, Expr, IRError, Leaf, Pick, Select, Unary, Var,
                   binary, call, cast, compare, const, convert, format_exprs, leaf, pick, postorder, replace_all, replace_leaves, select,
                   unary, var, verify, with_children)

__all__ = ["types", "CALLS", "Binary", "Call", "Cast", "Compare", "Const", "Convert", "Expr", "IRError", "Leaf", "Pick",
           "Select", "Unary", "Var", "binary", "call", "cast", "compare", "const", "convert", "format_exprs", "leaf", "pick",
           "postorder", "replace_all", "replace_leaves", "select", "unary", "var", "verify", "with_children"]
