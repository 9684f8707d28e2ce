"""A draft's timed sizes where the repository keeps no benchmark of the entry: the test's sizes,
grown until the measurement is about the kernel, not its launch.

The rule. Starting from the test's own sizes, the dimensions that may grow are doubled, the
smallest first, until the call's working set (inputs read and output written, in the job's
dtype) is at least `CACHE_MULTIPLE` × the device's last-level cache — a cold cache every
sample, whatever the kernel's reuse — or its FLOPs fill `FLOP_SECONDS` at the device's peak for
the dtype, whichever comes first. A dimension may grow where the test itself varies it, or its
name is batch- or token-like (`B`, `M`, `T`, `seq_len`, rows, the one axis of a 1-D tensor);
the others keep the test's value: a head_dim, a hidden size, a multiple the kernel needs (a
doubling keeps every power-of-two factor), and sizes two inputs share (one name) stay equal. A
test with none of these grows along the leading axis of its largest tensor. A repository's own
op (a `[reference]` draft) grows only the batch- and token-like sizes of its largest input where
the test names any:
how its other sizes are tied together is not known (a weight's rows = the heads × their width),
and the one axis of a 1-D input grows only where every input is 1-D (beside a larger tensor it
is a bias's or a scale's).

The bound. A call holds at most `MAX_WORKING_SET`; an op whose implementations hold more than
they read and write (a fused-linear loss's peer writes the [M, V] logits out, and its fp64
check holds them again) declares `peak_bytes(dims, itemsize)`, and the bound is held to that.

Which device. The local GPU where there is one of a kind the draft runs on (its model read from
what the kernel drivers list, its figures from `GPUS`); else the largest last-level cache and peak among the GPU
kinds the draft runs on, as flopwatch knows them (`GPUS`: H100 50 MiB of L2, H200 60 MiB,
MI300X/MI325X 256 MiB of Infinity Cache): a Triton draft runs on both vendors, so its sizes fill
an MI300X's cache (1 GiB), a CUDA-only or plain-torch one an H200's (240 MiB). A draft that runs
on the CPU as well has one list of sizes for every device: its working set is kept under
`CPU_CAP` (what a 2-core CI machine streams in about 30 ms; a CPU job with its checks and timing then
takes 10 to 15 s there), and where the GPU target is above that, the GPU rows are then short of it —
said in the draft (its sizes line) so that a user can raise them.

Nothing here runs: the sizes are arithmetic on the test's sizes and the tables below."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MiB = 1 << 20
CACHE_MULTIPLE = 4
FLOP_SECONDS = 100e-6
CPU_CAP = 256 * MiB
# What a draft may ask of one call at most, whatever the target (flopwatch's fp64 check keeps a
# few copies of the inputs and output beside them).
MAX_WORKING_SET = 4 << 30
T = 1e12
# (name, last-level cache in bytes, dense peak FLOP/s per dtype) of the GPU kinds flopwatch
# knows, from their data sheets (reports/device_specs.py holds the same peaks for the roofline):
# H100 SXM's L2 is 50 MiB; the H200 figure is the GH100 die's full 60 MiB (flopwatch's flush
# buffer is sized for it); MI300X/MI325X keep 256 MiB of Infinity Cache behind 8 × 4 MiB of L2.
GPUS: dict[str, tuple[tuple[str, int, dict], ...]] = {
    "cuda": (("H100", 50 * MiB, {"bf16": 989.4 * T, "fp16": 989.4 * T, "fp32": 66.9 * T}),
             ("H200", 60 * MiB, {"bf16": 989.4 * T, "fp16": 989.4 * T, "fp32": 66.9 * T})),
    "rocm": (("MI300X", 256 * MiB, {"bf16": 1307.4 * T, "fp16": 1307.4 * T, "fp32": 163.4 * T}),
             ("MI325X", 256 * MiB, {"bf16": 1307.4 * T, "fp16": 1307.4 * T, "fp32": 163.4 * T})),
}
ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "int64": 8, "int32": 4, "bool": 1}
# Names of batch- and token-like sizes (compared in lower case, underscores aside).
TOKEN_LIKE = frozenset({"b", "m", "s", "t", "l", "bt", "bs", "bsz", "batch", "batchsize", "nbatch", "seq",
                        "seqlen", "sl", "tokens", "ntokens", "numtokens", "rows", "nrows", "numrows", "length",
                        "n_tokens", "sequencelength"})
# Sizes an entry constrains, never grown even where the test varies them.
CONSTRAINED = frozenset({"d", "headdim", "dhead", "dh", "headsize", "dk", "dv"})


@dataclass(frozen=True)
class Target:
    """What a scaled size must reach: a working set in bytes or FLOPs, whichever first; the
    device it is for and its last-level cache (for the draft's line); the most bytes one call
    may take (the CPU's bound where the draft runs there too)."""

    bytes: int
    flops: float
    device: str
    cache: int
    cap: int = MAX_WORKING_SET


def _squash(name: str) -> str:
    return re.sub(r"_", "", name).lower()


def token_like(name: str) -> bool:
    return _squash(name) in TOKEN_LIKE


def constrained(name: str) -> bool:
    return _squash(name) in CONSTRAINED


def local_gpu(proc: Path = Path("/proc/driver/nvidia/gpus"),
              kfd: Path = Path("/sys/class/kfd/kfd/topology/nodes")) -> tuple[str, str] | None:
    """(kind, model) of this node's first GPU that flopwatch knows (`GPUS`), read from what the
    kernel drivers list — no GPU context in the driver process: NVIDIA's `information` files
    ("Model: NVIDIA H100 80GB HBM3"), AMD's KFD topology (gfx942: an MI300-class part). None
    without a GPU, or with one flopwatch has no figures for (its sizes then target the kinds
    the draft runs on)."""
    try:
        for info in sorted(proc.glob("*/information")):
            model = next((line.split(":", 1)[1].strip() for line in info.read_text(errors="replace").splitlines()
                          if line.startswith("Model:")), "")
            known = next((g for g in GPUS["cuda"] if g[0] in model), None)
            if known:
                return "cuda", known[0]
        for props in sorted(kfd.glob("*/properties")):
            text = props.read_text(errors="replace")
            if re.search(r"^gfx_target_version\s+9040\d", text, re.MULTILINE):
                return "rocm", "MI300X"
    except OSError:
        return None
    return None


def gpu_here() -> bool:
    """Whether the kernel drivers list a GPU on this node (NVIDIA's or AMD's), known or not."""
    try:
        nvidia = Path("/proc/driver/nvidia/gpus")
        return (nvidia.is_dir() and any(nvidia.iterdir())) or Path("/dev/kfd").exists()
    except OSError:
        return False


def target(devices: tuple[str, ...], dtype: str, local: tuple[str, str] | None = None) -> Target:
    """The target of a draft running on `devices`, in `dtype`: the local GPU's (`local`, as
    `local_gpu` reads it) where there is one of a kind the draft runs on, else the largest cache
    and peak among the GPU kinds it runs on."""
    cap = CPU_CAP if "cpu" in devices else MAX_WORKING_SET
    if local and local[0] in devices:
        gpu = next(g for g in GPUS[local[0]] if g[0] == local[1])
        return Target(CACHE_MULTIPLE * gpu[1], FLOP_SECONDS * gpu[2].get(dtype, 0.0), f"this node's {gpu[0]}", gpu[1],
                      cap)
    kinds = [k for k in devices if k in GPUS] or ["cuda"]
    gpus = [g for k in kinds for g in GPUS[k]]
    biggest = max(gpus, key=lambda g: g[1])
    peak = max(g[2].get(dtype, 0.0) for g in gpus)
    return Target(CACHE_MULTIPLE * biggest[1], FLOP_SECONDS * peak, f"an {biggest[0]}", biggest[1], cap)


def grown(sizes: dict[str, int], growable: list[str], measure, goal: Target) -> tuple[dict[str, int], str]:
    """`sizes` with the `growable` ones doubled, the smallest first, until `measure(sizes)` —
    (bytes, flops) of one call — reaches the goal or the next doubling would pass its cap; and
    why it stopped, in words."""
    out = dict(sizes)
    if not growable:
        return out, "no dimension the rule lets grow"
    cache = f"{CACHE_MULTIPLE} × the {_mib(goal.cache)} last-level cache of {goal.device}"
    for _ in range(64):
        nbytes, flops = measure(out)[:2]
        if nbytes >= goal.bytes:
            return out, f"working set {_mib(nbytes)} ≥ {cache}"
        if goal.flops and flops >= goal.flops:
            return out, f"{flops:.3g} FLOPs ≥ {FLOP_SECONDS * 1e6:.0f} µs at the peak of {goal.device}"
        name = min(growable, key=lambda n: (out[n], growable.index(n)))
        nxt = {**out, name: out[name] * 2}
        if _peak(measure(nxt)) > goal.cap:
            return out, (f"working set {_mib(nbytes)}, short of {cache}: kept under {_mib(goal.cap)} for the CPU, "
                         f"which runs it too" if goal.cap < MAX_WORKING_SET else
                         f"working set {_mib(nbytes)}, at flopwatch's bound of {_mib(goal.cap)} per call")
        out = nxt
    return out, "grown 64 times"


def _peak(measured: tuple) -> float:
    """What a call holds at its peak: the measure's third figure where it gives one (an op whose
    implementations materialise more than they read and write), else its working set."""
    return measured[2] if len(measured) > 2 else measured[0]


def _mib(n: float) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n / 1024:.0f} KiB"


def growable(names: list[str], varied: set[str] = frozenset(), single_axes: set[str] = frozenset(),
             leading: str = "", named: set[str] | None = None) -> tuple[list[str], str]:
    """The sizes the rule grows, in order, and why in words: those the test varies, those with a
    batch- or token-like name (a name the test gives: `named`, all where None), the only axis of
    a 1-D tensor (`single_axes`); else the leading axis of the largest tensor (`leading`); never
    a constrained one."""
    def tokenish(n: str) -> bool:
        return token_like(n) and (named is None or n in named)

    picked = [n for n in names if not constrained(n) and (n in varied or tokenish(n) or n in single_axes)]
    if picked:
        why = []
        varies = [n for n in picked if n in varied]
        if varies:
            why.append(f"{', '.join(varies)} (the test varies {'them' if len(varies) > 1 else 'it'})")
        tokens = [n for n in picked if n not in varied and tokenish(n)]
        if tokens:
            why.append(f"{', '.join(tokens)} (batch- or token-like)")
        flat = [n for n in picked if n not in varied and not tokenish(n)]
        if flat:
            why.append(f"{', '.join(flat)} (the length of a 1-D input)")
        return picked, "grew " + ", ".join(why)
    if leading and not constrained(leading):
        return [leading], f"grew {leading} (the leading axis of the largest input)"
    return [], ""


def itemsize(dtype: str) -> int:
    return ITEMSIZE.get(dtype, 4)


# -- the two kinds of draft --------------------------------------------------------------------------

def scaled_builtin(op_module, shape: list[int], dtype: str, goal: Target,
                   fed: dict[str, list[str]] | None = None) -> tuple[list[int], str, str]:
    """A built-in op's shape (its `DIMS`) grown by the rule: its batch- and token-like dims (`M`,
    `B`, `S`, `T`), those fed by a size the test varies or names batch- or token-like (`fed`:
    dim → those sizes), or a 1-D op's only one. (shape, what grew and why, why it stopped)."""
    dims = list(op_module.DIMS)
    sizes = dict(zip(dims, shape))
    fed = fed or {}
    picked, _ = growable(dims, set(fed), set(dims) if len(dims) == 1 else set())
    from_test = [f"{d} ← {', '.join(fed[d])}" for d in picked if d in fed]
    said = ([f"{', '.join(from_test)} (the test varies these sizes or names them batch- or token-like)"]
            if from_test else [])
    said += [f"{d} (batch- or token-like)" if token_like(d) else f"{d} (the length of a 1-D input)"
             for d in picked if d not in fed]
    why = "grew " + "; ".join(said) if said else ""
    size = itemsize(dtype)

    peak = getattr(op_module, "peak_bytes", None)

    def measure(s: dict) -> tuple[float, ...]:
        moved = op_module.bytes_moved(s, size)
        return (moved, op_module.flops(s)) + ((peak(s, size),) if peak is not None else ())

    out, stop = grown(sizes, picked, measure, goal)
    return [out[d] for d in dims], why, stop


def scaled_reference(rows, sizes: dict[str, int], dtype: str, goal: Target, named: set[str],
                     varied: set[str] = frozenset()) -> tuple[dict[str, int], str, str]:
    """A `[reference]` op's sizes grown by the rule. `named`: the sizes the test names itself
    (a number it writes gets a letter of flopwatch's, which says nothing of its role);
    `varied`: those its parametrize rows vary. (sizes, what grew and why, why it stopped)."""
    tensors = [r for r in rows if r.shape is not None and not r.dtype.startswith(("int", "bool"))]
    largest = max(tensors, key=lambda r: len(r.shape), default=None)
    # The one axis of a 1-D input is the data's length only where the inputs are all 1-D (a vector
    # add); beside a larger tensor it sizes a parameter (a bias, a scale), tied to the others.
    single = {r.shape[0] for r in tensors if len(r.shape) == 1 and isinstance(r.shape[0], str)} \
        if largest is not None and len(largest.shape) <= 1 else set()
    leading = largest.shape[0] if largest is not None and largest.shape and isinstance(largest.shape[0], str) else ""
    candidates = [n for n in sizes if any(n in r.shape for r in tensors)]
    # Where the test names batch- or token-like sizes of the data (the largest input), only
    # those grow. Nothing says how a repository's own op ties its other sizes together
    # (liger_mhc_coeffs: phi's N = HC·C and its M sizes the bias; its kernels unroll over HC), and
    # a varied one grown alone breaks the call or its compile.
    data = set(largest.shape) if largest is not None else set()
    tokens = [n for n in candidates if token_like(n) and n in named and n in data and not constrained(n)]
    picked, why = growable(tokens or candidates, set() if tokens else varied, set() if tokens else single,
                           leading if leading in candidates else "", named)

    def measure(s: dict) -> tuple[float, float]:
        return row_bytes(rows, s, dtype), 0.0

    out, stop = grown(sizes, picked, measure, goal)
    return out, why, stop


def row_bytes(rows: list, sizes: dict, dtype: str) -> int:
    """Bytes one call reads and writes: every tensor input, and an output as large as the
    largest input where the entry returns its own (as `workers.ops.reference` counts them)."""
    counts = []
    for row in rows:
        if row.shape is None:
            continue
        n = 1
        for d in row.shape:
            n *= d if isinstance(d, int) else sizes.get(d, 1)
        counts.append(n * itemsize(row.dtype or dtype or "fp32"))
    out = 0 if any(r.output for r in rows) else max(counts, default=0)
    return sum(counts) + out
