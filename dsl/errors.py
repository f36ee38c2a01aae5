"""The one error hierarchy users see: every user-caused failure is a DslError."""
from __future__ import annotations


class DslError(ValueError):
    """Base of every error a user can cause.

    The message names the op (and node, when there is one), the offending value
    and what was expected, e.g.
    ``Unsqueeze (node 'mask_4d'): axis 5 out of range [-4, 3] for output rank 4``.
    """


class ShapeError(DslError):
    """A shape, axis, permutation or broadcast is invalid for the op."""


class DTypeError(DslError):
    """An element type is unknown or not allowed where it was used."""


class UnsupportedError(DslError):
    """A valid request this project does not implement (op, opset, feature)."""


class UnsupportedAttributeError(UnsupportedError, AttributeError):
    """An attribute a value does not have (also an AttributeError, so hasattr() keeps working)."""


class InputError(DslError):
    """A runtime input (feed, buffer, attribute value) is malformed."""


class ResourceError(DslError):
    """A valid request needs more memory than the machine can give (the message says how much)."""


def where(op: str | None, node: str | None = None) -> str:
    """Format the location prefix of an error message: ``Op (node 'n')``."""
    text = op or "dsl"
    if node:
        text += f" (node {node!r})"
    return text


def out_of_memory(label: str, outputs: list) -> ResourceError:
    """The error for a MemoryError while ``label`` computed ``outputs`` (their TensorTypes)."""
    sizes = [t.nbytes for t in outputs if getattr(t, "nbytes", None) is not None]
    need = sum(sizes)
    shown = ", ".join(str(t) for t in outputs) or "its results"
    amount = f"{need} bytes ({need / 2 ** 30:.1f} GiB)" if sizes else "more memory than is free"
    return ResourceError(f"{label}: out of memory: computing {shown} needs {amount} beyond its inputs; "
                         f"free memory or compute in smaller pieces")
