"""Torch C++/CUDA extensions as their repositories build them: read statically, built once per node.
May import: workers.core, workers.isolation, workers.toolkit."""
