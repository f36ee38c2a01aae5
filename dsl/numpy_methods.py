"""The numpy-style methods traced values (trace.Tracer) and dsl.Tensor share: ``x[...]``, ``x.T``,
``x.mT``, ``x.astype``, ``x.reshape``, ``x.sum`` / ``mean`` / ``max`` / ``min`` / ``argmax`` /
``argmin``. Each forwards to
``_frontend``, which dsl/frontend.py installs when dsl is imported (it builds them from the op
functions, which sit above the modules defining Tracer and Tensor)."""
from __future__ import annotations


class NumpyMethods:
    __slots__ = ()
    _frontend = None

    def __getitem__(self, key):
        return self._frontend.getitem(self, key)

    @property
    def T(self):  # noqa: N802  (numpy's name)
        return self._frontend.T(self)

    @property
    def mT(self):  # noqa: N802  (numpy's name)
        return self._frontend.mT(self)

    def astype(self, to):
        return self._frontend.astype(self, to)

    def reshape(self, *shape):
        return self._frontend.reshape(self, *shape)

    # numpy's signature: axis=None, dtype=None, out=None, keepdims=False (np.sum(x) calls x.sum)
    def sum(self, *args, **kwargs):
        return self._frontend.sum(self, *args, **kwargs)

    def mean(self, *args, **kwargs):
        return self._frontend.mean(self, *args, **kwargs)

    def max(self, *args, **kwargs):
        return self._frontend.max(self, *args, **kwargs)

    def min(self, *args, **kwargs):
        return self._frontend.min(self, *args, **kwargs)

    def argmax(self, *args, **kwargs):
        return self._frontend.argmax(self, *args, **kwargs)

    def argmin(self, *args, **kwargs):
        return self._frontend.argmin(self, *args, **kwargs)
