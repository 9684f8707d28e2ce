"""One job in its own process: the slot's runner, the child, batches, spares, the zygote and its loop.
May import: workers.bindings, workers.core, workers.isolation, workers.measure, workers.ops,
    workers.toolkit, workers.torch_ext."""
