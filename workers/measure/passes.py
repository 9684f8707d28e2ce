"""Forward, backward and full passes of an entry whose output requires grad (an autograd
Function, as every Liger loss and norm): what each mode times, and the check of the backward
against the reference's gradients.

The modes, as Liger-Kernel's benchmarks time them (`benchmark/scripts/utils.py`,
`run_speed_benchmark`) and GUIDE §11 describes them:
- `forward`: the entry's call, as every result is timed (gradients off);
- `backward`: the forward once, then `backward(dy, retain_graph=True)` timed, the inputs'
  `.grad` reset to None before each sample (outside the timed region), so every sample
  allocates and writes its gradients as a training step does;
- `full`: forward and backward per sample, the gradients reset likewise.

`dy`, the gradient flowing in from above, is drawn once per job from the job's seed (a standard
normal of each output's shape and dtype), the same at every sample and in the check.

The check (`check_gradients`) runs the entry's forward and backward on fresh inputs and the
op's reference in fp64 on a copy of the same inputs taken before the call (an entry may write
into its inputs: Liger's cross entropy stores the gradient in the logits), with the same `dy`,
and compares each input's gradient by relative Frobenius error and max abs error, as outputs
are compared. Which inputs have gradients is the op's `GRAD_INPUTS` where it declares them
(Liger's JSD differentiates its input, not its target); an op that declares none expects one for
every floating input, except a repository's own op (`[reference]`, `op.py`, a problem), whose
inputs the entry gives no gradient for are listed, not failed: nothing says which it should.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

FORWARD, BACKWARD, FULL = "forward", "backward", "full"
MODES = (FORWARD, BACKWARD, FULL)


class PassError(ValueError):
    """A pass that cannot be run: the entry's output (or the reference's) has no gradient."""


def grad_names(op, inputs: dict) -> list[str]:
    """The inputs a backward pass differentiates: the floating tensors, within the op's
    `GRAD_INPUTS` where it declares them."""
    import torch

    names = [k for k, v in inputs.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    declared = getattr(op, "GRAD_INPUTS", None)
    return [n for n in names if n in declared] if declared is not None else names


def differentiable(result) -> list:
    """The tensors of what an entry returned (a tensor, or a tuple's tensors) that carry a graph."""
    import torch

    items = result if isinstance(result, (list, tuple)) else [result]
    return [t for t in items if isinstance(t, torch.Tensor) and t.requires_grad]


def upstream(outputs: list, seed: int, device: str) -> list:
    """The gradient flowing into each output: standard normal from `seed`, in its shape and dtype."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(tuple(o.shape), generator=gen, dtype=torch.float32, device=device).to(o.dtype)
            for o in outputs]


@dataclass
class Pass:
    """One mode of one job: `timed()` is what a sample times, `reset()` runs before each sample
    outside the timed region (the gradients set back to None); `outputs` the first forward's
    differentiable outputs (kept alive for `backward`'s retained graph), `upstream` the gradient
    flowing into each, `leaves` the inputs differentiated."""

    mode: str
    timed: Callable[[], None]
    reset: Callable[[], None]
    outputs: list
    upstream: list
    leaves: list

    @property
    def held_bytes(self) -> dict:
        """What a training step holds beside the pass's own allocations: the gradient flowing in
        (`upstream_bytes`) and, between steps that do not reset them, the inputs' gradients
        (`gradient_bytes`, one of each leaf's size), as Liger-Kernel's memory loop keeps them."""
        return {"upstream_bytes": sum(t.numel() * t.element_size() for t in self.upstream),
                "gradient_bytes": sum(t.numel() * t.element_size() for t in self.leaves)}


def _no_graph(what: str, mode: str) -> PassError:
    return PassError(f"mode {mode}: {what} does not require grad, so there is no backward pass to time; "
                     f"keep modes = [\"forward\"] for this entry, or return a tensor of an autograd graph")


def build(mode: str, call: Callable, inputs: dict, names: list[str], seed: int, device: str) -> Pass:
    """The `backward` or `full` pass of `call` (a returning entry, `call(inputs, None)`) on
    `inputs`, differentiating `names`. Runs the forward once (the backward pass's graph, and the
    outputs' shapes for `dy`). Raises PassError when nothing it returns requires grad."""
    import torch

    if mode not in (BACKWARD, FULL):
        raise ValueError(f"no pass to build for mode {mode!r}")
    leaves = [inputs[n].requires_grad_(True) for n in names]
    if not leaves:
        raise _no_graph("no input of the entry is a floating tensor", mode)
    with torch.enable_grad():
        outputs = differentiable(call(inputs, None))
    if not outputs:
        raise _no_graph("what the entry returned", mode)
    dys = upstream(outputs, seed, device)

    def reset() -> None:
        for t in leaves:
            t.grad = None

    if mode == BACKWARD:
        def timed() -> None:
            torch.autograd.backward(outputs, dys, retain_graph=True)
    else:
        def timed() -> None:
            with torch.enable_grad():
                got = differentiable(call(inputs, None))
            torch.autograd.backward(got, dys)

    return Pass(mode, timed, reset, outputs, dys, leaves)


def _errors(got, ref) -> tuple[float, float, bool]:
    """(relative Frobenius error, max abs error relative to max |ref|, all finite) of a gradient."""
    import torch

    got, ref = got.detach().double().reshape(-1), ref.detach().double().reshape(-1)
    finite = bool(torch.isfinite(got).all())
    diff = got - ref
    norm = float(torch.linalg.vector_norm(ref))
    rel = float(torch.linalg.vector_norm(diff)) / norm if norm > 0 else float(torch.linalg.vector_norm(diff))
    top = float(ref.abs().max()) if ref.numel() else 0.0
    abs_err = float(diff.abs().max()) / top if ref.numel() and top > 0 else (float(diff.abs().max()) if ref.numel()
                                                                               else 0.0)
    return rel, abs_err, finite


def check_gradients(call: Callable, reference: Callable, inputs: dict, names: list[str], seed: int, device: str,
                    rtol: float, atol: float, strict: bool = True) -> dict:
    """The entry's input gradients against the reference's (module docstring) on `inputs`
    (fresh, from the check's seed). `reference(inputs)` computes the expected output from fp64
    inputs and returns it (a tensor, or a tuple flattened end to end); `strict`: an input the
    entry gives no gradient for fails the check (False: it is listed in "not_differentiated").
    Returns the check's figures: passed, per input its errors, and a `problem` line when it
    failed. Raises PassError when the entry's or the reference's output has no graph."""
    import torch

    before = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    leaves = [inputs[n].requires_grad_(True) for n in names]
    with torch.enable_grad():
        got = _flat(differentiable(call(inputs, None)))
    if got is None:
        raise _no_graph("what the entry returned", BACKWARD)
    (dy,) = upstream([got], seed, device)
    # The entry may write into dy (Liger's rms_norm computes dX in place of dY): it gets a copy.
    grads = torch.autograd.grad(got, leaves, dy.clone(), allow_unused=True)
    ref_inputs = {k: (v.double().requires_grad_(k in names) if isinstance(v, torch.Tensor) and v.is_floating_point()
                      else v) for k, v in before.items()}
    with torch.enable_grad():
        expected = reference(ref_inputs)
        expected = _flat(expected if isinstance(expected, (list, tuple)) else [expected])
    if expected is None or not expected.requires_grad:
        raise PassError("mode backward: the reference's output does not require grad (it is not differentiable), "
                        "so the backward pass has nothing to be checked against")
    ref_leaves = [ref_inputs[n] for n in names]
    ref_grads = torch.autograd.grad(expected, ref_leaves, dy.double(), allow_unused=True)
    figures: dict = {"pass": BACKWARD, "seed": seed, "gradients": {}, "passed": True}
    problems, missing = [], []
    for name, g, r in zip(names, grads, ref_grads):
        if g is None and r is None:
            continue
        if g is None:
            missing.append(name)
            continue
        if r is None:
            r = torch.zeros_like(g, dtype=torch.float64)
        rel, abs_err, finite = _errors(g, r)
        ok = finite and rel <= rtol and abs_err <= atol
        figures["gradients"][name] = {"rel_fro_err": rel, "max_abs_err": abs_err, "finite": finite, "passed": ok}
        if not ok:
            why = "NaN or Inf" if not finite else f"relative error {rel:.3g} (tolerance {rtol:g}), max abs error " \
                                                  f"{abs_err:.3g} (tolerance {atol:g})"
            problems.append(f"gradient of {name}: {why}")
    if missing and strict:
        problems.append(f"the entry gives no gradient for {', '.join(missing)} (the reference does)")
    elif missing:
        figures["not_differentiated"] = missing
    if not figures["gradients"] and not problems:
        problems.append("the entry gives no gradient for any input")
    if problems:
        figures.update(passed=False, problem="backward: " + "; ".join(problems))
    return figures


def _flat(tensors: list):
    """One tensor of `tensors` flattened end to end (in fp64 where their dtypes differ); None
    when there are none."""
    import torch

    if not tensors:
        return None
    if len(tensors) == 1:
        return tensors[0]
    if len({t.dtype for t in tensors}) == 1:
        return torch.cat([t.reshape(-1) for t in tensors])
    return torch.cat([t.reshape(-1).double() for t in tensors])
