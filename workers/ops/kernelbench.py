"""KernelBench's correctness rules beside flopwatch's own check, for problem variants.

flopwatch judges a row against the problem's Model in fp64 with the problem's tolerances (rule
"fp64", the default). KernelBench (ScalingIntelligence/KernelBench, `src/kernelbench/eval.py`
@423217d) judges it against the Model run in the job's own precision, elementwise:
`torch.allclose(output, output_new, atol=tol, rtol=tol)` with tol 1e-4 for fp32 and 1e-2 for
fp16/bf16 ("kernelbench"); its v0 and v0.1 leaderboards used 1e-2 for fp32 too
("kernelbench-v0"). The same solution can pass one and fail another (a relative error of 1.4e-3
fails the fp64 check's 1e-3 and passes v0's 1e-2), so a problem variant names the rule its
verdict follows (`[problem] rule`) and every check computes all three: the Model in the job's
dtype costs one more forward, and a row whose verdicts differ says so in its diagnostic.
"""

from __future__ import annotations

FP64 = "fp64"
TODAY = "kernelbench"
V0 = "kernelbench-v0"
RULES = (FP64, TODAY, V0)


def tolerance(rule: str, dtype: str) -> float:
    """atol = rtol of KernelBench's allclose under `rule` for a job's dtype."""
    return 1e-2 if rule == V0 or dtype != "fp32" else 1e-4


def judge(figures: dict, expected, out, dtype: str, rule: str) -> None:
    """Add every rule's verdict to a check's figures (`figures["rules"]`) and make `rule`'s the
    check's own. `figures` are `workers.measure.correctness.evaluate`'s against the fp64
    reference; `expected` is the Model's output in the job's dtype on the same inputs, `out`
    the entry's. Writes past the output or elements never written fail every rule (allclose
    would not see them); NaN fails allclose as it does the fp64 check."""
    import torch

    from workers.measure.correctness import BLOCK_ELEMENTS

    intact = not (figures["guard_before"] or figures["guard_after"] or figures["unwritten"])
    rules = {FP64: {"passed": bool(figures["passed"]), "rel_err": figures["rel_fro_err"], "tol": figures["rtol"]}}
    same_shape = expected.shape == out.shape
    a, b = expected.reshape(-1), out.reshape(-1).to(expected.dtype)
    tols = {r: tolerance(r, dtype) for r in (TODAY, V0)}
    close = dict.fromkeys(tols, intact and same_shape)
    worst = 0.0
    # In blocks, as `evaluate` judges a large output: no full-size temporaries.
    for i in range(0, a.numel() if same_shape else 0, BLOCK_ELEMENTS):
        x, y = a[i:i + BLOCK_ELEMENTS], b[i:i + BLOCK_ELEMENTS]
        worst = max(worst, float((x.float() - y.float()).abs().nan_to_num(float("inf")).max()))
        for r, tol in tols.items():
            close[r] = close[r] and torch.allclose(x, y, atol=tol, rtol=tol)  # KernelBench's call, argument order too
    for r, tol in tols.items():
        rules[r] = {"passed": bool(close[r]), "tol": tol, "max_abs_diff": worst if same_shape else None}
    figures["rules"], figures["rule"] = rules, rule
    figures["passed"] = rules[rule]["passed"]


def _num(x: float) -> str:
    """1e-4, 1.42e-3, 0.25: how tolerances and errors are written in diagnostics."""
    if x == 0 or not 0.1 > abs(x) or x == float("inf"):
        return f"{x:.3g}"
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _name(rule: str, dtype: str) -> str:
    if rule == FP64:
        return "flopwatch's fp64 check"
    which = "KernelBench's rule today" if rule == TODAY else "KernelBench's v0 rule"
    return f"{which} (allclose, atol=rtol={_num(tolerance(rule, dtype))})"


def _fp64_figure(v: dict) -> str:
    return f"relative error {_num(v['rel_err'])} {'≤' if v['passed'] else '>'} {_num(v['tol'])}"


def values_failed(check: dict) -> bool:
    """Whether a failed check failed on its values by its rule alone (not on inputs it changed,
    a race or what it returned, which fail every rule)."""
    return ("rules" in check and not check["rules"][check["rule"]]["passed"] and not check.get("inputs_changed")
            and not check.get("repeat_mismatch") and not check.get("returned") and not check.get("output_ignores_inputs"))


def failure(check: dict, dtype: str) -> str:
    """A failed check's finding under a KernelBench rule ("" under fp64, whose findings
    `correctness.diagnose` words, and where the output was written out of place)."""
    rule = check.get("rule", FP64)
    if rule == FP64 or not values_failed(check) or check["unwritten"] or check["guard_before"] or check["guard_after"]:
        return ""
    v = check["rules"][rule]
    which = "KernelBench's rule today" if rule == TODAY else "KernelBench's v0 rule"
    if v["max_abs_diff"] is None:
        return f"incorrect by {which}: the output's shape is not the Model's in {dtype}"
    return (f"incorrect by {which}: not allclose to the Model in {dtype} at atol=rtol={_num(v['tol'])} "
            f"(max abs diff {_num(v['max_abs_diff'])})")


def note(checks: list[dict], passed: bool, dtype: str) -> str:
    """Where the other rules disagree with the row's verdict, one clause; "" where they agree.
    A failed row: the rules that would pass its failing check (and how to choose one); an ok
    row: those that would fail one of its checks."""
    judged = [c for c in checks if "rules" in c]
    if not judged:
        return ""
    rule = judged[0]["rule"]
    others = [r for r in RULES if r != rule]
    if not passed:
        bad = next((c for c in judged if not c["passed"]), None)
        flipped = [r for r in others if bad is not None and values_failed(bad) and bad["rules"][r]["passed"]]
        if not flipped:
            return ""
        passing = " and ".join(_name(r, dtype) + (f" ({_fp64_figure(bad['rules'][r])})" if r == FP64 else "")
                               for r in flipped)
        return ("incorrect by flopwatch's fp64 check; " if rule == FP64 else "") + \
            f'{passing} would pass it ([problem] rule = "{flipped[0]}")'
    failing = [(r, next(c for c in judged if not c["rules"][r]["passed"])) for r in others
               if any(not c["rules"][r]["passed"] for c in judged)]
    return "; ".join(f"{_name(r, dtype)} would fail it ("
                     + (_fp64_figure(c["rules"][r]) if r == FP64 else f"max abs diff {_num(c['rules'][r]['max_abs_diff'])}"
                        if c["rules"][r]["max_abs_diff"] is not None else "wrong shape") + ")"
                     for r, c in failing)
