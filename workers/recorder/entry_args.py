"""A recorded call of what an entry forwards to, read back as a call of the entry itself.

Liger-Kernel's functional entries only pass their parameters on:
`liger_cross_entropy(input, target, weight=None, ignore_index=-100, ...)` returns
`LigerCrossEntropyFunction.apply(input, target, weight, ignore_index, ...)`. A benchmark script
calls the Function (or the nn.Module wrapping it), so the recording holds calls of the Function;
the entry's sizes are those calls' arguments, put back under the entry's parameter names.
"""

from __future__ import annotations

from collections.abc import Mapping

from workers.recorder.calls import Arg, CallRecord


def entry_arguments(record: CallRecord, passes: Mapping[str, int | str]) -> dict[str, Arg]:
    """The entry's arguments in the recorded call (pure), in the entry's parameter order.

    `passes` maps each entry parameter to where the entry passes it in the call it forwards to:
    a position (`{"input": 0, "target": 1, "ignore_index": 3}` for `apply(input, target, weight,
    ignore_index, ...)`), a keyword or the callee's parameter name (`"reduction"`), or, for an
    nn.Module call, `"self.NAME"` for what the module holds (`{"X": 0, "W": "self.weight",
    "eps": "self.variance_epsilon"}` for `LigerRMSNorm.forward(hidden_states)`). A parameter
    the call did not pass is left out: the callee's own default applied there, which need not be
    the entry's, so the caller decides what it stands for.
    """
    out: dict[str, Arg] = {}
    for name, where in passes.items():
        arg = record.argument(where)
        if arg is not None:
            out[name] = arg
    return out
