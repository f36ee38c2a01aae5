"""Code generation: numba source for fused groups, compiled with in-memory and on-disk caches."""
