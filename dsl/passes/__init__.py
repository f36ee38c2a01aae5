"""Graph passes; each module has ``run(graph) -> changed``."""
