"""`flopwatch selftest`: the smallest gemm (64×64×64, fp32) through every path a node offers.
May import: workers.backends, workers.core, workers.cuda, workers.job, workers.measure, workers.toolkit.

`kernels/` holds one tiny variant per binding and back end (the `selftest` command loads their
manifests with the driver's validation); `paths.py` builds, checks, times
and profiles them through the same functions `flopwatch run` uses (build back ends, the
sandboxed child, the profilers) and returns one plain row per path.
"""
