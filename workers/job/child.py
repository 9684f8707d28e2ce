"""The sandboxed child: check one variant at one shape, then time it; write result.json.

Run as `python -m workers.job.child SPEC.json RESULT.json` by `workers.job.runner`. Anything that
goes wrong in here — a Python exception, a segfault, a hang — is classified by the parent
from the exit status and the stderr tail; this file only reports what it measured.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import sys
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from workers import bindings
from workers.bindings.python_entry import PYTHON_SIDE
from workers.core import status
from workers.core.records import DeviceInfo, Variant
from workers.isolation import affinity, device_lock
from workers.job import check_points, handoff, triton_jit
from workers.measure import correctness, device, fit, launch_floor, memory, passes
from workers.measure.timing import TimingSettings, time_cpu, time_gpu
from workers.ops import challenge, for_variant, get_op, kernelbench, torch_dtype
from workers.ops.problem import flatten_outputs
from workers.ops.repo import OpCodeError

PAIR_MIN_SAMPLES = 6
ALPHA, BETA = 1.5, 0.5  # used when a kernel declares alpha_beta, so both terms are exercised


def _sync(kind: str) -> None:
    if kind != "cpu":
        torch.cuda.synchronize()


def generator(seed: int, dev: str) -> torch.Generator:
    """The random source of a job's inputs, on the job's device (see the ops' make_inputs)."""
    return torch.Generator(device=dev).manual_seed(seed)


def reference_resolver(variant: Variant, artifact: Path):
    """How a `[reference]` op imports its callable: from this job's build, as the entry is."""
    from workers.bindings import python_entry

    return lambda call, key, folder: python_entry.resolve(variant, artifact, call, key, folder)


@dataclass
class Armed:
    """One check's inputs (from its seed) and its poisoned, guarded output, before the call.
    For an entry that returns its output: no output yet (`g` is set from what it returns), the
    reference computed before the call (its shape and dtype are what the entry must return)."""
    seed: int
    inputs: dict
    g: correctness.GuardedOutput | None
    before: dict
    alpha: float = 1.0
    beta: float = 0.0
    c_init: torch.Tensor | None = None
    ref: torch.Tensor | None = None
    returned_problem: str = ""  # what is wrong with what a returning entry handed back
    returned: object = None  # what a returning entry handed back, as it did (a problem's own check reads it)


def arm(op, variant: Variant, dims: dict, dtype, kind: str, seed: int, returns: bool = False) -> Armed:
    """Fresh random inputs from `seed`, the output poisoned inside guard bands, and a snapshot
    of the inputs (untrusted code: inputs are read-only)."""
    dev = "cpu" if kind == "cpu" else "cuda"
    gen = generator(seed, dev)
    inputs = op.make_inputs(dims, dtype, variant.layout, dev, gen)
    if returns:
        # A challenge problem's data is the entry's own copy (its check reads another): not a
        # read-only input.
        armed = Armed(seed, inputs, None, {} if getattr(op, "OWN_INPUTS", False) else correctness.snapshot_inputs(inputs))
        armed.ref = op.reference(inputs, variant.layout)
        return armed
    out_dtype = torch_dtype(variant.output_dtype or op.output_dtype(_dtype_name(dtype)))
    g = correctness.guarded_output(op.output_shape(dims), out_dtype, dev)
    armed = Armed(seed, inputs, g, {})
    if variant.alpha_beta:
        armed.alpha, armed.beta = ALPHA, BETA
        armed.c_init = torch.randn(op.output_shape(dims), generator=gen, device=gen.device).to(out_dtype)
        g.out.copy_(armed.c_init)
    armed.before = correctness.snapshot_inputs(inputs)
    return armed


def judge(armed: Armed, op, variant: Variant, dtype, kind: str, previous: dict | None) -> dict:
    """The figures of an armed check whose call has run: inputs unchanged, output against the
    fp64 reference (`correctness.evaluate`), and, when it failed, whether it equals the previous
    check's output bit for bit (other inputs: it does not depend on them). The output is left
    in figures["_out"] for the next check."""
    _sync(kind)
    inputs, g = armed.inputs, armed.g
    changed = correctness.changed_inputs(inputs, armed.before)
    if armed.returned_problem:
        figures = {"passed": False, "returned": armed.returned_problem, "seed": armed.seed, "unwritten": 0,
                   "_out": None}
        if changed:
            figures["inputs_changed"] = changed
        return figures
    if changed:
        inputs = armed.before  # the reference is of what the kernel was given
    ref = armed.ref if armed.ref is not None else \
        op.reference(inputs, variant.layout, armed.alpha, armed.beta, armed.c_init)
    rtol_default, atol_default = op.TOLERANCE[_dtype_name(dtype)]
    figures = correctness.evaluate(g, ref, variant.rtol if variant.rtol is not None else rtol_default,
                                   variant.atol if variant.atol is not None else atol_default)
    if variant.alpha_beta:
        figures["unwritten"] = 0  # C was initialised, not poisoned: unwritten cannot be told
    if getattr(op, "RULE", ""):  # a problem: KernelBench's verdicts beside the fp64 one, its rule's decides
        kernelbench.judge(figures, op.same_precision(inputs), g.out, _dtype_name(dtype), op.RULE,
                          correctness.BLOCK_ELEMENTS)
    if getattr(op, "verdict", None) is not None:  # a challenge problem's check_implementation decides
        passed, reason = op.verdict(inputs, armed.returned if armed.returned is not None else g.out)
        figures["problem_check"] = {"passed": passed, "reason": reason[:2000], "where": op.VERDICT_WHERE}
        figures["passed"] = passed
    figures["seed"] = armed.seed
    figures["out_shape"] = list(g.out.shape)
    if changed:
        figures.update(inputs_changed=changed, passed=False)
    if (not figures["passed"] and not figures["unwritten"] and previous
            and correctness.same_output(g.out, previous["out"])):
        figures["output_ignores_inputs"] = previous["seed"]
    figures["_out"] = g.out
    return figures


def check(call, op, variant: Variant, dims: dict, dtype, kind: str, seed: int, previous: dict | None = None,
          repeat: bool = True) -> dict:
    """One correctness check with fresh random inputs from `seed`. `previous` holds the
    output and seed of the check before (other inputs): an output equal to it bit for bit does
    not depend on this call's inputs. `repeat`: run once more on the same inputs (a race shows
    as an output that moves). The output is left in figures["_out"] for the next check."""
    returns = returns_output(call)
    armed = arm(op, variant, dims, dtype, kind, seed, returns)
    if returns:
        poison_next_output(armed, op, variant, dtype, kind)
        take_returned(armed, call(armed.inputs, None), op, variant, dtype)
    else:
        call(armed.inputs, armed.g.out, armed.alpha, armed.beta)
    figures = judge(armed, op, variant, dtype, kind, previous)
    if figures["passed"] and repeat and not variant.alpha_beta:
        figures["repeat_mismatch"] = _repeat_mismatch(call, armed.inputs, armed.g, kind)
        figures["passed"] = figures["repeat_mismatch"] == 0
    return figures


def unchecked_check(call, op, variant: Variant, dims: dict, dtype, kind: str) -> tuple[dict, dict]:
    """The check of an entry with no reference (`[reference] check = "none"`): two calls on the
    inputs of a fixed seed (the same at every commit, so the output's digest can be compared
    across commits), the second judged on what needs no reference — inputs unchanged, output
    fully written (into a poisoned, guarded buffer, or on a GPU a poisoned block for a returned
    one) and inside its bounds, finite — and against the first (a race). Returns the figures
    and the output's digest (`workers.ops.reference.output_digest`)."""
    from workers.ops.reference import DIGEST_SEED, output_digest

    dev = "cpu" if kind == "cpu" else "cuda"
    inputs = op.make_inputs(dims, dtype, variant.layout, dev, generator(DIGEST_SEED, dev))
    before = correctness.snapshot_inputs(inputs)
    figures = {"seed": DIGEST_SEED, "unchecked": True, "passed": False, "unwritten": 0}
    what = f"binding.entry {variant.binding.entry!r}"
    if returns_output(call):
        try:
            first = flatten_outputs(call(inputs, None), what)
            _sync(kind)
            if kind != "cpu":  # the second call's allocation most likely gets this poisoned block
                torch.cuda.empty_cache()
                correctness.poisoned_block(tuple(first.shape), first.dtype)
            g = correctness.returned_output(flatten_outputs(call(inputs, None), what))
        except OpCodeError as exc:
            return {**figures, "returned": f"{exc} (nothing to check it against: it must return its output)"}, {}
    else:
        out_dtype = torch_dtype(variant.output_dtype or op.output_dtype(_dtype_name(dtype)))
        g = correctness.guarded_output(op.output_shape(dims), out_dtype, dev)
        call(inputs, g.out)
        _sync(kind)
        first = g.out.clone()
        correctness.reset(g)
        call(inputs, g.out)
    _sync(kind)
    # The output against itself: guards, never-written and NaN/Inf elements are still found.
    found = correctness.evaluate(g, g.out.double(), float("inf"), float("inf"))
    changed = correctness.changed_inputs(inputs, before)
    problem = correctness.diagnose({**found, "inputs_changed": changed}, tuple(g.out.shape)) \
        if changed or not found["passed"] else ""
    same_size = first.numel() == g.out.numel()
    moved = correctness.moved_elements(first.reshape(-1), g.out.reshape(-1)) if same_size else first.numel()
    if moved and not problem:
        problem = f"output changed between two runs on the same inputs at {moved} element(s) (a race?)"
    figures.update(passed=not problem, out_shape=list(g.out.shape), unwritten=found["unwritten"],
                   repeat_mismatch=moved, **({"problem": problem} if problem else {}))
    return figures, output_digest(g.out)


def gradient_check(call, op, variant: Variant, dims: dict, dtype, kind: str, seed: int) -> dict:
    """The backward check of a job measured in a backward or full pass (`passes.check_gradients`)
    on fresh inputs of `seed`: the entry's input gradients against the reference's in fp64, with
    the op's gradient tolerances (`GRAD_TOLERANCE`, else its output's; `[tolerance]` sets both)."""
    dev = "cpu" if kind == "cpu" else "cuda"
    inputs = op.make_inputs(dims, dtype, variant.layout, dev, generator(seed, dev))
    rtol, atol = getattr(op, "GRAD_TOLERANCE", op.TOLERANCE)[_dtype_name(dtype)]
    rtol = variant.rtol if variant.rtol is not None else rtol
    atol = variant.atol if variant.atol is not None else atol
    # A repository's own op does not say which inputs its entry differentiates: those it gives no
    # gradient for are listed, not failed (`passes` module docstring).
    strict = not variant.repo_op or hasattr(op, "GRAD_INPUTS")
    return passes.check_gradients(call, lambda ref_inputs: op.reference(ref_inputs, variant.layout), inputs,
                                  passes.grad_names(op, inputs), seed + 7, dev, rtol, atol, strict)


# The identity queries started beside each job's checks (`device.info` in a thread of its own:
# nvidia-smi / rocm-smi on a GPU). A job that fails before it reads its identity must still not
# end this process while a query's tool runs: the orphan would be killed by the job's scope and
# the result marked "left processes behind".
_IDENTITY_QUERIES: list[ThreadPoolExecutor] = []


def _identity_queries_done() -> None:
    while _IDENTITY_QUERIES:
        _IDENTITY_QUERIES.pop().shutdown(wait=True)


# Where a launch floor is measured (`workers.measure.launch_floor`): "gpu" (the default: every GPU
# result), "all" (CPU jobs too: the call path of a CPU entry, a test's way to see the rule on
# this machine) or "off". The job's spec (`launch_floor`) wins over the environment.
LAUNCH_FLOOR_ENV = "FLOPWATCH_LAUNCH_FLOOR"
FLOORS = launch_floor.Floors()


def wants_floor(spec: dict, kind: str) -> bool:
    where = spec.get("launch_floor") or os.environ.get(LAUNCH_FLOOR_ENV) or "gpu"
    return where == "all" or (where == "gpu" and kind != "cpu")


def measure_floor(spec: dict, variant: Variant, op, dims: dict, dtype, kind: str, mode: str,
                  median_s: float) -> dict:
    """The launch floor of this job's call path (`workers.measure.launch_floor`): the job's own
    median where its shape is already the floor's, else the floor measured once per variant,
    dtype and floor size in this process. An entry that fails at its smallest size gets an
    empty launch's floor, and the failure is noted."""
    how, small = launch_floor.plan(variant, op, dims)
    if how == launch_floor.SMALLEST_SIZE and small == dict(dims):
        return {"floor_s": median_s, "how": how, "dims": small, "own_shape": True}
    key = launch_floor.key_of(variant.name, spec["dtype"], how, small)
    try:
        floor, fresh = FLOORS.get(key, lambda: _time_floor(spec, variant, op, small, dtype, kind, mode, how))
    except Exception as exc:  # noqa: BLE001 - whatever the entry raised at its smallest size: the launch's own floor
        note = f"the entry failed at {','.join(f'{k}={v}' for k, v in small.items())}: {type(exc).__name__}: {exc}"
        key = launch_floor.key_of(variant.name, spec["dtype"], launch_floor.EMPTY_LAUNCH, {})
        floor, fresh = FLOORS.get(key, lambda: _time_floor(spec, variant, op, {}, dtype, kind, mode,
                                                           launch_floor.EMPTY_LAUNCH))
        floor = {**floor, "note": note[:300]}
    return {**floor, "measured_now": fresh}


def _time_floor(spec: dict, variant: Variant, op, small: dict, dtype, kind: str, mode: str, how: str) -> dict:
    """Time the floor: the entry at `small` in the job's mode, or an empty launch."""
    dev = "cpu" if kind == "cpu" else "cuda"
    reset = None
    if how == launch_floor.EMPTY_LAUNCH:
        fn = launch_floor.empty_launch(kind)
    else:
        small_call = bindings.load(variant, Path(spec["artifact"]), op, kind, small, dtype)
        inputs = op.make_inputs(small, dtype, variant.layout, dev, generator(spec["seeds"][0] + 3, dev))
        if mode != passes.FORWARD:
            small_pass = passes.build(mode, small_call, inputs, passes.grad_names(op, inputs), spec["seeds"][0] + 4,
                                      dev)
            fn, reset = small_pass.timed, small_pass.reset
        else:
            out = timing_output(small_call, op, variant, small, spec["dtype"], dev)
            fn = (lambda: small_call(inputs, None)) if returns_output(small_call) else (lambda: small_call(inputs, out))
        fn()  # compiles what a new size compiles (a Triton kernel's specialisation), outside the loop
        _sync(kind)
    settings = TimingSettings(**{**spec.get("timing", {}), **launch_floor.FLOOR_TIMING, "method": "adaptive"})
    if kind == "cpu":
        t = time_cpu(fn, replace(settings, warmup_s=0.02), before_each=reset)
    else:
        t = time_gpu(fn, settings, device.flush_bytes_here(kind), before_each=reset)
    return {"floor_s": t.median_s, "how": how, "dims": small, "n": len(t.samples_s)}


def returns_output(call) -> bool:
    """Whether a loaded entry returns its output (`workers.bindings`) instead of writing one."""
    return bool(getattr(call, "returns", False))


def timing_output(call, op, variant: Variant, dims: dict, dtype_name: str, dev: str) -> torch.Tensor | None:
    """The output a timed call writes into (the op's shape and output dtype), or None for an
    entry that returns its own."""
    if returns_output(call):
        return None
    out_dtype = torch_dtype(variant.output_dtype or op.output_dtype(dtype_name))
    return torch.empty(op.output_shape(dims), dtype=out_dtype, device=dev)


def expected_output(armed: Armed, op, variant: Variant, dtype) -> tuple[tuple, torch.dtype]:
    """The shape and dtype a returning entry must hand back: the reference's shape; the
    dtype of the op's output for this input dtype (`output_dtype` when the manifest sets it),
    or the reference's own for an integer result (an argmax)."""
    ref = armed.ref
    if not ref.is_floating_point() or getattr(op, "REFERENCE_DTYPE", False):
        return tuple(ref.shape), ref.dtype
    return tuple(ref.shape), torch_dtype(variant.output_dtype or op.output_dtype(_dtype_name(dtype)))


def poison_next_output(armed: Armed, op, variant: Variant, dtype, kind: str) -> None:
    """On a GPU, leave a block of the output's size filled with the poison pattern in torch's
    caching allocator, so the entry's own allocation of its output most likely gets it: an
    element the kernel never writes then shows as never written, as in a guarded output."""
    if kind == "cpu":
        return
    shape, out_dtype = expected_output(armed, op, variant, dtype)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the poisoned block is then the free block of that size
    correctness.poisoned_block(shape, out_dtype)


def take_returned(armed: Armed, result, op, variant: Variant, dtype) -> None:
    """What a returning entry handed back, checked for type, shape and dtype before its values;
    a mismatch is the check's finding (`returned_problem`), not an exception."""
    shape, out_dtype = expected_output(armed, op, variant, dtype)
    armed.returned = result
    try:
        out = flatten_outputs(result, f"binding.entry {variant.binding.entry!r}")
    except OpCodeError:
        armed.returned_problem = (f"the entry returned {type(result).__name__}, not a tensor (binding.returns = true "
                                  f"says it returns its output; an entry that writes into one it is given is "
                                  f"returns = false)")
        return
    if tuple(out.shape) != shape:
        armed.returned_problem = (f"the entry returned a tensor of shape {list(out.shape)}, expected {list(shape)} "
                                  f"(the output of {variant.op} at this shape)")
    elif out.dtype != out_dtype and not (getattr(op, "WIDER_OUTPUT_OK", False) and _wider(out.dtype, out_dtype)):
        armed.returned_problem = (f"the entry returned {_dtype_text(out.dtype)}, expected {_dtype_text(out_dtype)}"
                                  + (f"; if the kernel computes in {_dtype_text(out.dtype)}, set output_dtype = "
                                     f"\"{_dtype_name(out.dtype)}\"" if out.dtype in _NAMES else ""))
    else:
        armed.g = correctness.returned_output(out)


def _wider(returned, expected) -> bool:
    """A floating result in more bits than expected (float32 for float16)."""
    return returned.is_floating_point and expected.is_floating_point and returned.itemsize > expected.itemsize


def _dtype_text(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _repeat_mismatch(call, inputs: dict, g: correctness.GuardedOutput, kind: str) -> int:
    """Run again on the same inputs: a race shows up as an output that moves."""
    first = g.out.clone()
    if returns_output(call):
        again = flatten_outputs(call(inputs, None), "the entry")  # a tuple (rope's (q, k)) as it was checked
        _sync(kind)
        return correctness.moved_elements(first, again.reshape(first.shape)) if again.numel() == first.numel() \
            else first.numel()
    correctness.reset(g)
    call(inputs, g.out)
    _sync(kind)
    return correctness.moved_elements(first, g.out)


_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def _dtype_name(dtype) -> str:
    return _NAMES[dtype]


def profile_once(call, op, variant: Variant, dims: dict, dtype, spec: dict) -> dict:
    """The timed call once more, for a profiler watching this process: warm up, then one call
    inside the NVTX range `flopwatch:timed`, bracketed by two int8 fill kernels (markers). A
    backward or full point profiles its pass (its gradients reset before each call)."""
    inputs = op.make_inputs(dims, dtype, variant.layout, "cuda", generator(spec["seeds"][0], "cuda"))
    out = timing_output(call, op, variant, dims, spec["dtype"], "cuda")

    def timed() -> None:
        call(inputs, out)

    reset = timed_pass = None
    if variant.mode != passes.FORWARD:
        timed_pass = passes.build(variant.mode, call, inputs, passes.grad_names(op, inputs), spec["seeds"][0] + 2,
                                  "cuda")
        reset = timed_pass.reset
    marker = torch.empty(64, dtype=torch.int8, device="cuda")
    for _ in range(2):
        if timed_pass is not None:
            reset()
            timed_pass.timed()
        else:
            timed()
    torch.cuda.synchronize()
    if reset is not None:
        reset()
    marker.fill_(1)
    torch.cuda.nvtx.range_push("flopwatch:timed")
    (timed_pass.timed if timed_pass is not None else timed)()
    torch.cuda.nvtx.range_pop()
    marker.fill_(2)
    torch.cuda.synchronize()
    return {"status": "ok", "profiled": True}


PREPARED = False  # whether this process was prepared ahead of its job (a spare's, `prepare`)
# What that preparation cost, for the first job this process runs (`run` puts it in its phases
# as "prepared_ahead"): seconds spent waiting for the device lock and holding it, the driver's
# start outside it, the hold of each kind of step ("<step>_held_s") and the longest single hold,
# and when it ended. A timing loop waits for such steps on its device, and with four GPUs busy
# those waits grew (docs/benchmarks.md, "Four GPUs, 2026-11-28").
PREPARED_AHEAD: dict = {}
# "1": the spare makes its GPU context under the device lock, as its other steps. By default it
# does not: making a context is host and driver work (no kernel, no allocation of ours), and it
# was the step that grew with four GPUs busy (its holds summed 10.5 s over a 1-GPU run of the
# bundled suite, 19.5 s over a 4-GPU run on 4x H100), each hold one a timing loop had to warm up
# through. Made outside the lock, the 4-GPU run's warm-up fell from 15.3 to 8.2 s while every
# series' median moved no more than between two runs with it held (|change| median 0.53% vs
# 0.59%, mean 1.24% vs 1.21%, 81 series; docs/benchmarks.md, "Four GPUs, 2026-11-28, later").
# That A/B resolves about 1-2% per series. The worst case is known and smaller than that: a
# process making contexts back to back beside a power-limited 8192³ GEMM on an H200 moved its
# median by 1.26% (`benchmarks/spare_prep.py`); a slot makes one per job, for 0.1-0.3 s.
CONTEXT_LOCK_ENV = "FLOPWATCH_SPARE_CONTEXT_LOCK"


def prepare(kind: str, step=contextlib.nullcontext) -> None:
    """What every GPU job does before its own kernel runs, done on a tiny problem by a spare
    process ahead of its job (`workers.job.spare`): the driver, the device's context, the cuBLAS
    handle of the reference, and the first use of torch's kernels that draw inputs, guard and
    check outputs and record events. Nothing of the job's variant runs here. Each use of the
    device runs inside `step()` (the spare's device lock, `workers.isolation.device_lock.preparing`); the
    driver's start and the context (`CONTEXT_LOCK_ENV`) run no kernel and are made outside it.
    On an H200 (benchmarks/spare_prep.py): driver 0.12 s, context 0.11 s, the first bf16
    inputs, reference and checks 0.28 s, the rest ~5 ms. (On the CPU it warms the same host
    kernels; spares are kept for GPU slots only, unless asked.)"""
    global PREPARED
    spent = {"waited_s": 0.0, "held_s": 0.0, "driver_s": 0.0, "longest_held_s": 0.0}

    @contextlib.contextmanager
    def timed(name: str, locked: bool = True):  # one step under the lock: its wait for it, then its hold
        asked = time.perf_counter()
        with step() if locked else contextlib.nullcontext():
            got = time.perf_counter()
            yield
        held = time.perf_counter() - got
        spent["waited_s"] += got - asked
        for key in ("held_s" if locked else "unlocked_s", f"{name}_held_s"):
            spent[key] = spent.get(key, 0.0) + held
        if locked:
            spent["longest_held_s"] = max(spent["longest_held_s"], held)

    dev = "cpu" if kind == "cpu" else "cuda"
    if dev == "cuda":
        began = time.perf_counter()
        torch.cuda.init()
        spent["driver_s"] = time.perf_counter() - began
        with timed("context", locked=os.environ.get(CONTEXT_LOCK_ENV) == "1"):
            # The primary context (torch's set_device alone does not make it on device 0; a
            # device synchronize does): host and driver work, no kernel, no allocation of ours.
            torch.cuda.set_device(0)
            torch.cuda.synchronize()
        with timed("first_alloc"):
            torch.empty(1, device="cuda")
            torch.cuda.synchronize()
    op = get_op("gemm")
    dims = {"M": 64, "N": 64, "K": 64}
    for name in ("bf16", "fp16", "fp32"):
        with timed("reference"):
            inputs = op.make_inputs(dims, torch_dtype(name), "nt", dev, generator(0, dev))
            ref = op.reference(inputs, "nt")
            _sync(kind)
        with timed("checks"):
            g = correctness.guarded_output(op.output_shape(dims), torch.float32, dev)
            g.out.copy_(ref)
            correctness.evaluate(g, ref, *op.TOLERANCE[name])
            correctness.moved_elements(g.out, g.out.clone())
            _sync(kind)
    if dev == "cuda":
        with timed("events"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.empty(1 << 20, dtype=torch.int32, device="cuda").zero_()
            end.record()
            end.synchronize()
            start.elapsed_time(end)
            torch.cuda.empty_cache()  # the job, not the spare, decides what its memory holds
    PREPARED = True
    PREPARED_AHEAD.update({k: round(v, 4) for k, v in spent.items()}, ended_at=time.time())


# "0": each side of a paired timing gets buffers of its own (to measure what sharing them changes).
PAIR_SHARED_BUFFERS_ENV = "FLOPWATCH_PAIR_SHARED_BUFFERS"


def _same_buffers(a: Variant, b: Variant) -> bool:
    """Whether two builds of a variant take the same inputs and output (a manifest may change
    its layout, output dtype or calling convention between the commits)."""
    return (a.layout, a.alpha_beta, a.output_dtype, a.binding.returns) == \
        (b.layout, b.alpha_beta, b.output_dtype, b.binding.returns)


def _pair_side(call, op, variant: Variant, inputs: dict, out, spec: dict, dev: str) -> tuple:
    """(call, inputs, out, timed, reset) of one side of a paired timing: the call itself, or the
    variant's backward or full pass on those inputs (each side its own graph; shared inputs get
    their gradients reset before every sample, whichever side runs)."""
    if variant.mode == passes.FORWARD:
        return call, inputs, out, (lambda: call(inputs, out)), None
    built = passes.build(variant.mode, call, inputs, passes.grad_names(op, inputs), spec["seeds"][0] + 2, dev)
    return call, inputs, out, built.timed, built.reset


def pair(spec: dict) -> dict:
    """Time two builds of one variant (base and head) alternately in this one process: sample
    i of A and sample i of B run back to back, in a random order, so whatever the machine does
    over time (a neighbour's load, a frequency step) affects both sides alike. On a shared
    2-core machine the level moved by ±25% within seconds while samples a call apart agreed."""
    import random
    import time

    kind, dims = spec["device_kind"], spec["dims"]
    variants = [Variant.from_dict(v) for v in spec["variants"]]
    op = for_variant(variants[0], reference_resolver(variants[0], Path(spec["artifacts"][0])))
    dtype = torch_dtype(spec["dtype"])
    dev = "cpu" if kind == "cpu" else "cuda"
    if kind != "cpu":
        torch.cuda.set_device(0)
    sides = []
    for v, artifact in zip(variants, spec["artifacts"]):
        call = bindings.load(v, Path(artifact), op, kind, dims, dtype)
        if sides and _same_buffers(variants[0], v) and os.environ.get(PAIR_SHARED_BUFFERS_ENV) != "0":
            # Both builds read and write the very same tensors: where a tensor lies in device
            # memory can move a memory-bound kernel by tens of percent (two copies of one
            # binary, each on buffers of its own, timed 30% apart on an H100); one set of
            # buffers leaves the builds as the only difference between the sides.
            sides.append(_pair_side(call, op, v, sides[0][1], sides[0][2], spec, dev))
            continue
        inputs = op.make_inputs(dims, dtype, v.layout, dev, generator(spec["seeds"][0], dev))
        out = timing_output(call, op, v, dims, spec["dtype"], dev)
        sides.append(_pair_side(call, op, v, inputs, out, spec, dev))
    flush = (torch.empty(device.flush_bytes_here(kind) // 4, dtype=torch.int32, device="cuda")
             if kind != "cpu" else None)

    def sample(side) -> float:
        *_, timed, reset = side
        if reset is not None:
            reset()
        if flush is None:
            t0 = time.perf_counter()
            timed()
            return time.perf_counter() - t0
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        timed()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    rng = random.Random(spec["seeds"][1])
    budget = float(spec.get("timing", {}).get("budget_s", 2.0))
    samples: list[list[float]] = [[], []]
    with device_lock.timing():  # no next job prepares on this GPU meanwhile
        warm_until = time.perf_counter() + min(0.5, budget / 4)
        while time.perf_counter() < warm_until:
            for side in sides:
                sample(side)
        deadline = time.perf_counter() + budget
        # At least PAIR_MIN_SAMPLES pairs: enough for a signed-rank test to reach p < 0.05, and
        # no more than that for a kernel of a second per launch when the budget is spent.
        while time.perf_counter() < deadline or len(samples[0]) < PAIR_MIN_SAMPLES:
            order = [0, 1] if rng.random() < 0.5 else [1, 0]
            for i in order:
                samples[i].append(sample(sides[i]))
            if len(samples[0]) >= 5000:
                break
    if kind != "cpu":
        handoff.timing_done()
    return {"status": "ok", "pair_samples": samples}


def run(spec: dict, release: bool = True) -> dict:
    """Check, then time; `phases` says where the child's time went (load = GPU context, inputs
    of the binding and the library load; correctness; warm-up; timing). `release`: say after
    the timing loop that the next job may start (`workers.job.handoff`); not before the last job of
    a batch."""
    clock = time.perf_counter()
    # Durations end in `_s`; epoch marks end in `_at` (where the timing loop sat in the slot's
    # timeline: what the next job's process may overlap, and what a benchmark lines up with
    # nvidia-smi's samples).
    phases: dict = {"began_at": time.time()}
    if PREPARED_AHEAD:  # this process was a spare: what preparing it cost, on its first job only
        phases["prepared_ahead"] = dict(PREPARED_AHEAD)
        PREPARED_AHEAD.clear()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[name] = round(phases.get(name, 0.0) + now - clock, 4)
        clock = now

    variant = Variant.from_dict(spec["variant"])
    kind, dims = spec["device_kind"], spec["dims"]
    op = for_variant(variant, reference_resolver(variant, Path(spec["artifact"])))
    dtype = torch_dtype(spec["dtype"])
    if kind != "cpu":
        torch.cuda.set_device(0)  # creates this process's context: torch's device 0 is the first visible one
    too_big = fit.too_big(op, dims, dtype.itemsize, kind)  # before anything of the shape is allocated
    if too_big:
        return {"status": "invalid", "diagnostic": too_big, "phases": phases}
    call = bindings.load(variant, Path(spec["artifact"]), op, kind, dims, dtype)
    if spec.get("mode") == "profile":
        return profile_once(call, op, variant, dims, dtype, spec)
    # The identity query (nvidia-smi / rocm-smi) runs beside the checks and the timing loop and
    # is read when the job ends: waited for before the loop, it held the device idle for
    # 0.1-0.5 s on every job whose checks were shorter (on a 4-GPU node, where the tool answers
    # slower with every GPU busy, that was half of what the device work grew by).
    if spec.get("device_identity"):  # the slot's, from its first job (`device.reusable_identity`)
        identity: Future = Future()
        identity.set_result(DeviceInfo.from_dict(spec["device_identity"]))
    else:
        pool = ThreadPoolExecutor(1, thread_name_prefix="flopwatch-identity")
        identity = pool.submit(device.info, kind)
        pool.shutdown(wait=False)
        _IDENTITY_QUERIES.append(pool)

    def with_identity(out: dict) -> dict:
        out["device_info"] = identity.result().to_dict()
        return out

    lap("load_s")
    ran_in, verdicts = "", []
    if variant.check_points:  # once per variant, dtype and device in this process (`workers.job.check_points`)
        ran_in, verdicts = check_points.run(
            spec, variant, op, kind, dtype, check,
            lambda d: bindings.load(variant, Path(spec["artifact"]), op, kind, d, dtype),
            lambda d: fit.too_big(op, d, dtype.itemsize, kind),
            lambda figures, d: finding(figures, op, d, spec["dtype"]))
        lap("correctness_s")
        if not all(p["passed"] for p in verdicts):
            return with_identity(check_points.record({"checks": [], "phases": phases}, ran_in, verdicts,
                                                     ",".join(f"{k}={v}" for k, v in dims.items())))
    # The second check is the timing loop's first call, on its own seed's inputs in a
    # poisoned, guarded output, judged after the loop (a GPU kernel of a second per launch
    # spent a launch per job on a check of its own). The race check (same inputs twice, the
    # output must not move) is that loop's first against its last call; on the CPU also a
    # repeat of the first check. A kernel that updates its output (alpha/beta) is checked
    # twice before timing.
    unchecked = bool(getattr(op, "UNCHECKED", False))  # nothing to check against: `unchecked_check`
    # A backward or full pass times no forward output: its forward is checked twice before
    # timing, then its gradients (`passes.check_gradients`).
    mode = variant.mode or passes.FORWARD
    timed_check = not variant.alpha_beta and len(spec["seeds"]) > 1 and not unchecked and mode == passes.FORWARD
    checks, previous, digest = [], None, {}
    # The first call compiles (and autotunes) a Triton kernel: what Triton's JIT made of it
    # is the analysis of a Triton module that has no [triton] table.
    with triton_jit.recording() if variant.backend in PYTHON_SIDE else contextlib.nullcontext({}) as jit:
        if unchecked:
            figures, digest = unchecked_check(call, op, variant, dims, dtype, kind)
            checks.append(figures)
        for i, seed in enumerate([] if unchecked else spec["seeds"][:1] if timed_check else spec["seeds"]):
            checks.append(check(call, op, variant, dims, dtype, kind, seed, previous,
                                repeat=i == 0 and kind == "cpu"))
            previous = {"out": checks[-1].pop("_out"), "seed": seed}
    lap("correctness_s")
    result = {"checks": checks, "phases": phases}
    if verdicts:  # every one passed: kept with the row
        check_points.record(result, ran_in, verdicts, ",".join(f"{k}={v}" for k, v in dims.items()))
    if digest:
        result["output"] = digest
    if jit.get("kernels") or jit.get("autotune"):
        result["jit"] = jit
    if variant.repo_op:  # the driver does not run the repository's op: its counts come from here
        result["work"] = {"flops": float(op.flops(dims)),
                          "bytes_moved": float(op.bytes_moved(dims, torch_dtype(spec["dtype"]).itemsize))}
    if unchecked and not checks[0]["passed"]:
        return with_identity({**result, "status": status.INCORRECT,
                              "diagnostic": checks[0].get("problem") or checks[0].get("returned")})
    if not all(c["passed"] for c in checks):
        return with_identity(_incorrect(result, checks, op, dims, spec["dtype"]))
    dev = "cpu" if kind == "cpu" else "cuda"
    if mode != passes.FORWARD and not unchecked:
        try:
            grads = gradient_check(call, op, variant, dims, dtype, kind, spec["seeds"][0])
        except passes.PassError as exc:
            return with_identity({**result, "status": status.INVALID, "diagnostic": str(exc)})
        checks.append(grads)
        lap("correctness_s")
        if not grads["passed"]:
            return with_identity({**result, "status": status.INCORRECT,
                                  "diagnostic": f"seed {grads['seed']}: {grads['problem']}"})
    returns = returns_output(call)
    armed = arm(op, variant, dims, dtype, kind, spec["seeds"][1], returns) if timed_check else None
    reset = None  # what runs before each sample, outside it (a pass's gradients set back to None)
    held: dict = {}  # a pass's gradient flowing in and its inputs' gradients, in bytes (`Pass.held_bytes`)
    if armed is not None:
        inputs, out = armed.inputs, (None if returns else armed.g.out)
        if returns:
            poison_next_output(armed, op, variant, dtype, kind)
    else:
        inputs = op.make_inputs(dims, dtype, variant.layout, dev, generator(spec["seeds"][0] + 1, dev))
        out = timing_output(call, op, variant, dims, spec["dtype"], dev)
    settings = TimingSettings(**spec.get("timing", {}))
    # A returning entry allocates its output inside the timed call, as its callers see it; the
    # last one it returned is kept (for the race check), so two outputs live at once.
    returned: list = [None]

    def timed() -> None:
        if returns:
            returned[0] = call(inputs, None)
        else:
            call(inputs, out)

    if mode != passes.FORWARD:
        try:
            run_pass = passes.build(mode, call, inputs, passes.grad_names(op, inputs), spec["seeds"][0] + 2, dev)
        except passes.PassError as exc:
            return with_identity({**result, "status": status.INVALID, "diagnostic": str(exc)})
        timed, reset = run_pass.timed, run_pass.reset  # the pass is what a sample times
        held = run_pass.held_bytes

    first: list = []
    keep_first = None
    if armed is not None:
        keep_first = (lambda: first.append(returned[0])) if returns else (lambda: first.append(out.clone()))
    phases["loop_began_at"] = time.time()
    floor_on = wants_floor(spec, kind)
    if kind == "cpu":
        timing = time_cpu(timed, settings, after_first=keep_first, before_each=reset)
        lap("timing_s")
        if floor_on:
            result["launch_floor"] = measure_floor(spec, variant, op, dims, dtype, kind, mode, timing.median_s)
            lap("launch_floor_s")
    else:
        # No next job's preparation step starts on this GPU while this one warms up and times
        # (`workers.job.spare`); one in progress ends beside the warm-up, and no sample is taken
        # before it has. Time blocked waiting for it is its own phase, not warm-up.
        with device_lock.claim() as claim:
            # The correctness launches ran just before on this device: they count as warm-up.
            timing = time_gpu(timed, settings, device.flush_bytes_here(kind), warmed_s=phases["correctness_s"],
                              after_first=keep_first, claim=claim, before_each=reset)
            if claim.blocked_s:
                phases["lock_wait_s"] = round(claim.blocked_s, 4)
            lap("timing_s")
            # Still the device's only loop: the floor's own loop, and the one call whose memory
            # is counted, run before the next job may start its checks beside them.
            if floor_on:
                result["launch_floor"] = measure_floor(spec, variant, op, dims, dtype, kind, mode, timing.median_s)
                lap("launch_floor_s")
            result["memory"] = {**memory.peak_above(timed, reset), "inputs_bytes": memory.inputs_bytes(inputs),
                                **held}
            lap("memory_s")
    phases["loop_ended_at"] = time.time()
    if kind != "cpu" and release:
        handoff.timing_done()  # the next job's process may start its checks beside what follows
    if armed is not None:
        # Held shared: the next job's timing loop waits for this step as for a spare's.
        with device_lock.preparing() if kind != "cpu" else contextlib.nullcontext():
            if returns:
                moved = _returned_moved(first, returned[0])
                if first:
                    take_returned(armed, first[0], op, variant, dtype)  # the check is of the first call
                else:
                    armed.returned_problem = "the timing loop made no call"
            else:
                moved = correctness.moved_elements(first[0], out) if first else 0
                if first:
                    out.copy_(first[0])  # the check's figures are of the first call, in its guarded buffer
            figures = judge(armed, op, variant, dtype, kind, previous)
        figures.pop("_out")
        figures["repeat_mismatch"] = moved
        if moved:
            figures["passed"] = False
        checks.append(figures)
        lap("correctness_s")
        if not figures["passed"]:
            if moved:
                result.update(status="incorrect", diagnostic=(
                    f"output changed between two runs on the same inputs at {moved} element(s) (a race?): "
                    f"the first and the last launch of the timing loop differ"))
                return with_identity(result)
            return with_identity(_incorrect(result, checks, op, dims, spec["dtype"]))
    # The timing loop's own split: inputs and the flush buffer count as warm-up.
    phases["warmup_s"] = round(phases["timing_s"] - timing.sampling_s - phases.get("lock_wait_s", 0.0), 4)
    phases["timing_s"] = timing.sampling_s
    phases["ended_at"] = time.time()
    result.update(status=status.UNCHECKED if unchecked else status.OK, samples_s=timing.samples_s,
                  timing={**timing.summary(), "mode": mode})
    if mode != passes.FORWARD and unchecked:
        result["diagnostic"] = f"{mode}: gradients not checked (no reference to check them against)"
    disagreed = kernelbench.note(checks, True, spec["dtype"])  # ok by its rule; another would fail it
    if disagreed:
        result["diagnostic"] = disagreed
    return with_identity(result)


def _returned_moved(first: list, last) -> int:
    """Elements that differ between the first and the last output a returning entry handed
    back in the timing loop (same inputs: a race); 0 when they cannot be compared as tensors."""
    if not first or not isinstance(first[0], torch.Tensor) or not isinstance(last, torch.Tensor):
        return 0
    if first[0].shape != last.shape or first[0].dtype != last.dtype or first[0] is last:
        return 0
    return correctness.moved_elements(first[0].contiguous(), last.contiguous())


def _incorrect(result: dict, checks: list[dict], op, dims: dict, dtype: str) -> dict:
    """The result of a job whose check failed, with the first failing check's diagnosis (and,
    for a problem, the KernelBench rules that would pass it)."""
    bad = next(c for c in checks if not c["passed"])
    result["status"] = "incorrect"
    found = finding(bad, op, dims, dtype)
    result["diagnostic"] = "; ".join(filter(None, (
        f"seed {bad['seed']}: " + found,
        f"output changed between two runs on the same inputs at {bad['repeat_mismatch']} element(s) (a race?)"
        if bad.get("repeat_mismatch") else "",
        kernelbench.note(checks, False, dtype))))
    return result


def finding(bad: dict, op, dims: dict, dtype: str) -> str:
    """What a failed check found, in words: the problem's own check's reason, a KernelBench
    rule's finding, else flopwatch's (`correctness.diagnose`)."""
    shape = bad.get("out_shape") or (op.output_shape(dims) if hasattr(op, "output_shape") else ())
    return challenge.failure(bad) or kernelbench.failure(bad, dtype) or correctness.diagnose(bad, tuple(shape))


def main(argv: list[str]) -> int:
    affinity.apply(dict(os.environ))  # a spawned child's slot CPUs; a forked child has its warm runner's already
    if argv[1] == "--env":  # what this process sees of its devices (a slot's self-test)
        from workers.measure.smi import visible_devices

        Path(argv[2]).write_text(json.dumps({"pid": os.getpid(), "visible": visible_devices(dict(os.environ)),
                                             "prepared": PREPARED, "device_lock": device_lock.path(),
                                             "cpus": affinity.format_cpulist(os.sched_getaffinity(0))}))
        return 0
    if argv[1] == "--probe":  # the identity of this slot's device (KIND OUT.json)
        Path(argv[3]).write_text(json.dumps(device.info(argv[2]).to_dict()))
        return 0
    spec_path, result_path = Path(argv[1]), Path(argv[2])
    spec = json.loads(spec_path.read_text())
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    try:
        if spec.get("mode") == "batch":
            run_batch(spec, result_path)
            return 0
        _write(result_path, json.dumps(_reported(lambda: pair(spec) if spec.get("mode") == "pair" else run(spec))))
        return 0
    finally:
        _identity_queries_done()


def run_batch(spec: dict, out_dir: Path) -> None:
    """The jobs of one variant, in this one process and in order (`workers.job.batch`): before each,
    its index in `current.txt` and a watchdog at its timeout (faulthandler ends the process
    there with the stack on stderr, whatever the main thread is blocked in); after each, its
    `result<i>.json` in `out_dir`. A job that does not end `ok` ends the batch: whatever it may
    have broken in this process, the jobs after it run in processes of their own."""
    jobs = spec["jobs"]
    for i, job in enumerate(jobs):
        _write(out_dir / "current.txt", str(i))
        faulthandler.dump_traceback_later(float(job["timeout_s"]), exit=True)
        try:
            result = _reported(lambda: run(job, release=i == len(jobs) - 1))  # noqa: B023 (called here)
        finally:
            faulthandler.cancel_dump_traceback_later()
        _write(out_dir / f"result{i}.json", json.dumps(result))
        # A job that is not ok ends the batch, unless the next job is settled by a check point
        # that failed here (it is written `incorrect` without running anything of the variant).
        if not status.measured(result.get("status")) and not (
                i + 1 < len(jobs) and check_points.answered_by_failure(jobs[i + 1])):
            return
        if job["device_kind"] != "cpu":
            # What this job's tensors held goes back to the device: the next shape's fit check
            # (`workers.measure.fit`) reads the device's free memory.
            torch.cuda.empty_cache()


def _reported(measure) -> dict:
    """`measure()`'s result, or the failure it raised as a result (the traceback on stderr)."""
    from workers.torch_ext.runtime import UndeclaredExtension

    try:
        return measure()
    except (OpCodeError, UndeclaredExtension) as exc:  # the op or the manifest is wrong, not the kernel
        traceback.print_exc()
        return {"status": "invalid", "diagnostic": str(exc)}
    except challenge.NeedsDevice as exc:  # the problem's code asks for a device this job has not
        return {"status": status.SKIPPED, "diagnostic": str(exc)}
    except Exception as exc:  # reported, then the parent marks the job crashed
        traceback.print_exc()
        return {"status": "crashed", "diagnostic": f"{type(exc).__name__}: {exc}"}


def _write(path: Path, text: str) -> None:
    """Whole or not at all: a reader never sees half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
