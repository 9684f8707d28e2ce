"""Verify on one NVIDIA GPU, in one command, what docs/measurement.md says of launch floors, peak
memory and passes (issue 48), on Liger-Kernel as `flopwatch new` drafts it and on a planted
history:

1. Liger's functional entries (src/liger_kernel/transformers/functional.py, drafted by
   `flopwatch new`, unedited but for `modes` on every entry whose body calls an autograd
   Function's `apply`) at the sizes of their tests: every forward row marked launch-bound; a peak
   memory for every GPU result; forward, backward and full for every autograd entry, the backward
   checked against the reference's gradients;
2. Liger's own benchmark scripts of MEMORY_OPS (`benchmark/scripts/benchmark_<op>.py
   --model llama_2_7b`: three token counts, 1024 to 4096), run in the same call, against
   flopwatch's full pass of the same entry and its peer at the scripts' sizes: the
   Liger-to-peer peak memory ratio of both, within ±15%;
3. a planted history of an autograd entry on the GPU (`planted_repo`): a comment-only commit
   (no memory alarm), a +20% allocation (a memory regression in `compare`, a step the detector
   records, the commit `bisect --metric memory` names), a backward-only slowdown (`slower` in
   backward and full, not in forward).

Liger's checkout is the caller's (this machine fetches nothing): `--repos .ext` holds
`Liger-Kernel/`. Full outputs (drafts, run summaries, the scripts' output, logs) go to OUT
(default ./gpu-verify-modes); a short table comes last; the exit status says whether every check
held.

    python3 benchmarks/verify_modes_gpu.py --repos .ext [--steps liger,planted] [--budget 0.2]

Order: the scripts start beside the drafting (no GPU work of flopwatch's), the planted history
runs once they have ended (its verdicts share the GPU with nothing), then the Liger run.
`--planted-device cpu` rehearses the planted part's flow on a machine without a GPU (its
memory checks cannot hold there).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verify_ops_gpu import cli, git_commit  # the helpers of the other GPU verifications (this folder)

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "gpu-verify-modes"))
WORK = Path(os.environ.get("MODES_WORK", "/tmp/bench/modes"))  # checkouts, stores, sites: not sent back
MODES = ["forward", "backward", "full"]
RATIO_TOLERANCE = 0.15
SCRIPT_MODEL = "llama_2_7b"  # its 4096-token context caps the scripts' sweeps at 1024, 2048, 4096 tokens
SCRIPT_TIMEOUT_S = 150
# Runs one Liger benchmark script with `utils.run_benchmarks` passing on only the full pass of its
# memory metric: the one figure the comparison reads (peak memory is counted per process, so the
# scripts may run side by side). Argv: SCRIPT; the script's own arguments follow.
MEMORY_RUNNER = r'''
import runpy, sys
import utils

whole = utils.run_benchmarks


def full_memory_only(*args, **kwargs):
    if kwargs.get("metric_name") != "memory" or "full" not in (kwargs.get("kernel_operation_modes") or ()):
        return None
    return whole(*args, **{**kwargs, "kernel_operation_modes": ["full"]})


utils.run_benchmarks = full_memory_only
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
'''


@dataclass(frozen=True)
class MemoryOp:
    """A Liger op whose benchmark script measures its full pass's peak memory against a torch
    implementation that is flopwatch's built-in peer too: the script, and how one of its points
    (x, the script's config) is flopwatch's shape and dtype."""

    op: str
    script: str
    dims: object  # (x, cfg) -> the flopwatch sizes, in the op's DIMS order
    dtype: object = None  # (cfg) -> fp32 | bf16 | fp16; default: the config's dtype


def _cfg_dtype(cfg: dict) -> str:
    return {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}[cfg.get("dtype",
                                                                                               "torch.float32")]


MEMORY_OPS = (
    MemoryOp("layer_norm", "benchmark_layer_norm.py", lambda x, c: [x, c["hidden_size"]]),
    MemoryOp("group_norm", "benchmark_group_norm.py",
             lambda x, c: [max(1, x // c["H"]), c["hidden_size"], c["H"], c["hidden_size"] // c["channels_per_group"]]),
    MemoryOp("softmax", "benchmark_softmax.py", lambda x, c: [x, c["hidden_size"]]),
    MemoryOp("relu_squared", "benchmark_relu_squared.py", lambda x, c: [x, c["hidden_size"]]),
    MemoryOp("sparsemax", "benchmark_sparsemax.py", lambda x, c: [x, c["hidden_size"]]),
    MemoryOp("poly_norm", "benchmark_poly_norm.py", lambda x, c: [x, c["hidden_size"]]),
    # the script's logits are torch.randn's default dtype
    MemoryOp("cross_entropy", "benchmark_cross_entropy.py", lambda x, c: [x, c["vocab_size"]], lambda c: "fp32"),
    MemoryOp("fused_linear_cross_entropy", "benchmark_fused_linear_cross_entropy.py",
             lambda x, c: [x, c["hidden_size"], c["vocab_size"]]),
)
LIGER_PROVIDERS = ("liger",)
PEER_PROVIDERS = ("torch", "huggingface")


# -- Liger's entries and drafts --------------------------------------------------------------------

def autograd_entries(functional: Path) -> list[str]:
    """The functional entries (`liger_*`) whose body calls an autograd Function's `apply`."""
    found = []
    for node in ast.parse(functional.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("liger_"):
            calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and n.func.attr == "apply"]
            if calls:
                found.append(node.name)
    return found


def with_modes(text: str, modes: list[str]) -> str:
    """A draft's variant.toml with `modes = [...]` among its top-level keys (after `name`); a
    draft that names its modes already keeps them."""
    if re.search(r"^modes\s*=", text, re.MULTILINE):
        return text
    line = "modes = [" + ", ".join(f'"{m}"' for m in modes) + "]\n"
    out, done = [], False
    for row in text.splitlines(keepends=True):
        out.append(row)
        if not done and row.startswith("name = "):
            out.append(line)
            done = True
    if not done:
        raise ValueError("the draft has no top-level name line")
    return "".join(out)


def sized_copy(text: str, name: str, shapes: list[list[int]], dtype: str, modes: list[str]) -> str:
    """A draft's variant.toml renamed, at `shapes` and `dtype`, measuring `modes` (the memory
    comparison's variants: the same entry as the draft)."""
    out = []
    for row in text.splitlines(keepends=True):
        if row.startswith("name = "):
            row = f'name = "{name}"\n'
        elif row.startswith("dtypes = "):
            row = f'dtypes = ["{dtype}"]\n'
        elif row.startswith(("shapes = ", "modes = ")):  # the draft's own modes: the copy measures `modes`
            continue
        out.append(row)
    text = "".join(out)
    text = text.replace(f'name = "{name}"\n', f'name = "{name}"\nshapes = {json.dumps(shapes)}\n', 1)
    return with_modes(text, modes)


# -- Liger's benchmark scripts ---------------------------------------------------------------------

def fake_distribution(folder: Path, version: str) -> Path:
    """A `liger_kernel-VERSION.dist-info` for the scripts' `importlib.metadata.version("liger-kernel")`,
    the checkout not being installed; returns the folder to put on PYTHONPATH."""
    info = folder / f"liger_kernel-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: liger-kernel\nVersion: {version}\n")
    return folder


def project_version(pyproject: Path) -> str:
    m = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.MULTILINE)
    return m.group(1) if m else "0.0.0"


def start_scripts(liger: Path, ops: tuple[MemoryOp, ...]) -> dict[str, tuple[subprocess.Popen, Path]]:
    """Each op's benchmark script started (all at once: only their peak memory is read, which the
    allocator counts per process; their speed figures are not used), stdout to OUT."""
    scripts = liger / "benchmark" / "scripts"
    dist = fake_distribution(WORK / "liger-dist", project_version(liger / "pyproject.toml"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(liger / "src"), str(scripts), str(liger), str(dist),
                                                        os.environ.get("PYTHONPATH", "")])}
    runner = WORK / "full_memory_only.py"
    runner.write_text(MEMORY_RUNNER)
    started = {}
    for m in ops:
        log = OUT / f"script-{m.op}.txt"
        if not (scripts / m.script).is_file():
            log.write_text(f"{scripts / m.script}: no such script in this checkout\n")
            continue
        with log.open("w") as f:
            proc = subprocess.Popen([sys.executable, str(runner), m.script, "--model", SCRIPT_MODEL], cwd=scripts, env=env,
                                    stdout=f, stderr=subprocess.STDOUT)
        started[m.op] = (proc, log)
    return started


def benchmark_data(stdout: str) -> list[dict]:
    """Every BenchmarkData record Liger's `run_benchmarks` printed (after its "Benchmark Data" banner)."""
    records, decoder = [], json.JSONDecoder()
    for chunk in stdout.split("********** Benchmark Data **********")[1:]:
        start = chunk.find("[")
        if start < 0:
            continue
        try:
            value, _ = decoder.raw_decode(chunk[start:])
        except ValueError:
            continue
        records += [r for r in value if isinstance(r, dict)]
    return records


def script_points(records: list[dict]) -> dict[int, dict]:
    """{x: {"liger": MB, "peer": MB, "config": {...}}} of the full pass's peak memory (median)."""
    points: dict[int, dict] = {}
    for r in records:
        if r.get("metric_name") != "memory" or r.get("kernel_operation_mode") != "full":
            continue
        who = "liger" if r["kernel_provider"] in LIGER_PROVIDERS else \
            "peer" if r["kernel_provider"] in PEER_PROVIDERS else None
        if who is None:
            continue
        config = json.loads(r.get("extra_benchmark_config_str") or "{}")
        for x, mb in zip(r["x_values"], r["y_values_50"]):
            points.setdefault(int(x), {"config": config})[who] = float(mb)
    return {x: p for x, p in points.items() if "liger" in p and "peer" in p}


# -- flopwatch's rows ------------------------------------------------------------------------------

def total_bytes(row: dict, liger_terms: bool) -> float | None:
    """A full pass's peak memory as a training step holds it: its inputs, the gradient flowing in
    and what the pass allocates above them; with `liger_terms`, also the inputs' gradients of the
    step before, which Liger's memory loop never resets (`workers.measure.passes.Pass.held_bytes`)."""
    mem = (row.get("timing") or {}).get("memory") or {}
    if row.get("peak_mem_bytes") is None or "inputs_bytes" not in mem:
        return None
    held = mem.get("upstream_bytes", 0) + (mem.get("gradient_bytes", 0) if liger_terms else 0)
    return float(row["peak_mem_bytes"] + mem["inputs_bytes"] + held)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class Outcome:
    checks: list[Check] = field(default_factory=list)
    ratios: list[dict] = field(default_factory=list)

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append(Check(name, bool(ok), detail))


def mode_of(variant: str) -> str:
    m = re.search(r"\bmode=(\w+)\]$", variant)
    return m.group(1) if m else "forward"


def family(variant: str) -> str:
    return re.sub(r"\[mode=\w+\]$", "", variant)


def judge_liger(rows: list[dict], drafts: list[dict], autograd: list[str], outcome: Outcome) -> None:
    """Checks 1: launch-bound at test sizes, memory on every GPU result, the passes of every
    autograd entry with their backward checked. A draft whose sizes `new` had to guess (no test
    gave them) is no test size: its marks are listed, not held to."""
    # this machine's GPU: a Triton draft's rocm rows are skipped here
    gpu = [r for r in rows if (r.get("device") or "").startswith("cuda")]
    names = {d["variant"] for d in drafts}
    guessed = {d["variant"] for d in drafts if "shapes" in (d.get("guessed") or [])}
    mine = [r for r in gpu if family(r["variant"]) in names]
    forward_ok = [r for r in mine if mode_of(r["variant"]) == "forward" and r["status"] in ("ok", "unchecked")]
    at_test = [r for r in forward_ok if r["variant"] not in guessed]
    unmarked = sorted(r["variant"] for r in at_test if not r.get("launch_bound"))
    outcome.add(f"Liger entries at their test sizes marked launch-bound: {len(at_test) - len(unmarked)} of "
                f"{len(at_test)} measured ({len(drafts)} drafted)", not unmarked and at_test,
                ("not marked: " + ", ".join(unmarked)) if unmarked else "")
    for r in forward_ok:
        if r["variant"] in guessed:
            print(f"  (guessed sizes, not held to) {r['variant']} {r['shape']}: "
                  f"{'launch-bound' if r.get('launch_bound') else 'not launch-bound'}, median "
                  f"{r.get('median_s')}, floor {r.get('launch_floor_s')}", flush=True)
    measured = [r for r in gpu if r["status"] in ("ok", "unchecked")]
    no_memory = sorted({r["variant"] for r in measured if r.get("peak_mem_bytes") is None})
    outcome.add(f"a peak memory on every measured GPU result: {len(measured) - len(no_memory)} of {len(measured)}",
                not no_memory and measured, ", ".join(no_memory))
    no_floor = sorted({r["variant"] for r in measured if not r.get("launch_floor_s")})
    outcome.add(f"a launch floor on every measured GPU result: {len(measured) - len(no_floor)} of {len(measured)}",
                not no_floor and measured, ", ".join(no_floor))
    by_name = {r["variant"]: r for r in mine}
    missing = []
    for entry in autograd:
        for mode in MODES:
            name = entry if mode == "forward" else f"{entry}[mode={mode}]"
            r = by_name.get(name)
            checked = mode == "forward" or any(c.get("pass") == "backward" and c.get("passed")
                                               for c in (r or {}).get("correctness", {}).get("checks", []))
            if r is None or r["status"] != "ok" or not checked:
                why = "not run" if r is None else f"{r['status']}: {(r.get('diagnostic') or '')[:160]}"
                missing.append(f"{name} ({why})")
    outcome.add(f"forward, backward and full of the {len(autograd)} autograd entries, the backward checked: "
                f"{len(autograd) * 3 - len(missing)} of {len(autograd) * 3} ok", not missing, "; ".join(missing))


def judge_ratios(rows: list[dict], scripts: dict[str, dict], outcome: Outcome) -> None:
    """Checks 2: flopwatch's Liger-to-peer peak memory ratio (full pass) against each script's."""
    by = {(r["variant"], r["shape"]): r for r in rows if (r.get("device") or "").startswith("cuda")}
    within_ops = set()
    for m in MEMORY_OPS:
        points = scripts.get(m.op) or {}
        for x, p in sorted(points.items()):
            dims = m.dims(x, p["config"])
            shape = ",".join(f"{k}={v}" for k, v in zip(dims_names(m.op), dims))
            mine = by.get((f"memratio_{m.op}[mode=full]", shape))
            peer = by.get((f"peer.{m.op}[mode=full]", shape))
            script_ratio = p["liger"] / p["peer"]
            row = {"op": m.op, "x": x, "shape": shape, "script_liger_mb": p["liger"], "script_peer_mb": p["peer"],
                   "script_ratio": script_ratio}
            if mine and peer:
                for terms in (True, False):
                    a, b = total_bytes(mine, terms), total_bytes(peer, terms)
                    row["flopwatch_ratio" + ("_liger_terms" if terms else "")] = a / b if a and b else None
                if mine.get("peak_mem_bytes") and peer.get("peak_mem_bytes"):
                    row["above_inputs_ratio"] = mine["peak_mem_bytes"] / peer["peak_mem_bytes"]
            fw = row.get("flopwatch_ratio_liger_terms")
            row["within"] = fw is not None and abs(fw / script_ratio - 1) <= RATIO_TOLERANCE
            outcome.ratios.append(row)
        rows_of_op = [r for r in outcome.ratios if r["op"] == m.op]
        if rows_of_op and all(r["within"] for r in rows_of_op):
            within_ops.add(m.op)
    outcome.add(f"Liger-to-peer peak memory ratio (full pass) within ±{RATIO_TOLERANCE:.0%} of Liger's script at every "
                f"size: {len(within_ops)} of {len(MEMORY_OPS)} ops (at least 6)", len(within_ops) >= 6,
                ", ".join(sorted(within_ops)))


def dims_names(op: str) -> tuple[str, ...]:
    from workers.ops import get_op

    return tuple(get_op(op).DIMS)


@dataclass
class LigerPrepared:
    """A copy of Liger's checkout with its drafts (modes added to the autograd entries), and its
    benchmark scripts running."""

    repo: Path
    drafts: list[dict]
    autograd: list[str]
    started: dict


def at_test_sizes(text: str) -> str:
    """A draft's variant.toml timed at its test's own size: `new` drafts the benchmark sizes as
    `shapes` and keeps the test's size as a `[[check]]` point (checked, not timed); here that
    point becomes the one timed shape, as drafts read before benchmark sizes were taken. A draft
    without a check point is returned as it is."""
    m = re.search(r"^\[\[check\]\]\nshapes = (\[.*?\])(\s+#.*)?$", text, re.MULTILINE)
    if m is None:
        return text
    text = text[:m.start()].rstrip() + "\n"  # the check table is the last one `new` writes
    return re.sub(r"^shapes = .*$", lambda _: f"shapes = {m.group(1)}", text, count=1, flags=re.MULTILINE)


def prepare_liger(source: Path, drafts: Path | None) -> LigerPrepared:
    """Step 1's drafting and step 2's scripts, started: nothing here times on the GPU but the
    scripts, whose peak memory (counted per process) is all that is read of them. With
    `drafts` (a folder holding `liger-drafts/` — every file `new` wrote, at its path in the
    repository — and `sizes-liger-new.json`: what verify_sizes_gpu.py --part draft wrote on a
    GPU node), those drafts are taken as `new` wrote them instead of drafting again."""
    repo = WORK / "Liger-Kernel"
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns(".git", "flopwatch", ".flopwatch"))
    git_commit(repo, "Liger-Kernel as fetched")
    started = start_scripts(repo, MEMORY_OPS)  # beside the drafting, which needs no GPU
    if drafts is not None:
        shutil.copytree(drafts / "liger-drafts", repo, dirs_exist_ok=True)  # flopwatch.toml and flopwatch/
        drafts_json = json.loads((drafts / "sizes-liger-new.json").read_text())
        print(f"[Liger-Kernel] drafts of `flopwatch new` taken from {drafts}", flush=True)
    else:
        drafted = cli(repo, "new", "src/liger_kernel/transformers/functional.py", "--no-build", "--json",
                      log="liger-new.log", out=OUT, label="[Liger-Kernel] ")
        drafts_json = json.loads(drafted.stdout) if drafted.stdout.strip() else {"drafts": []}
    (OUT / "liger-new.json").write_text(json.dumps(drafts_json, indent=1))
    draft_records = drafts_json.get("drafts", [])
    drafts = [d["variant"] for d in draft_records]
    autograd = [e for e in autograd_entries(repo / "src/liger_kernel/transformers/functional.py") if e in drafts]
    for name in drafts:
        path = repo / "flopwatch" / name / "variant.toml"
        if path.is_file():
            text = at_test_sizes(path.read_text())
            path.write_text(with_modes(text, MODES) if name in autograd else text)
    return LigerPrepared(repo, draft_records, autograd, started)


def wait_for_scripts(started: dict) -> dict[str, dict]:
    """Each script's full-pass memory points, once it has ended (or been stopped at its limit)."""
    scripts: dict[str, dict] = {}
    for op, (proc, log) in started.items():
        try:
            proc.wait(timeout=SCRIPT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        scripts[op] = script_points(benchmark_data(log.read_text()))
        print(f"[Liger-Kernel] benchmark_{op}.py --model {SCRIPT_MODEL}: exit {proc.returncode}, "
              f"{len(scripts[op])} point(s) with both providers", flush=True)
    (OUT / "liger-scripts.json").write_text(json.dumps(scripts, indent=1))
    return scripts


def run_liger(prepared: LigerPrepared, scripts: dict[str, dict], budget: float, outcome: Outcome) -> dict:
    """Steps 1 and 2: the drafts at their test sizes and the memory comparison's variants at the
    scripts' sizes, in one run."""
    repo, draft_records, autograd = prepared.repo, prepared.drafts, prepared.autograd
    drafts = [d["variant"] for d in draft_records]
    for m in MEMORY_OPS:
        points = scripts.get(m.op)
        draft = repo / "flopwatch" / f"liger_{m.op}" / "variant.toml"
        if not points or not draft.exists():
            continue
        config = next(iter(points.values()))["config"]
        dtype = m.dtype(config) if m.dtype else _cfg_dtype(config)
        folder = repo / "flopwatch" / f"memratio_{m.op}"
        folder.mkdir(exist_ok=True)
        folder.joinpath("variant.toml").write_text(sized_copy(
            draft.read_text(), f"memratio_{m.op}", [m.dims(x, p["config"]) for x, p in sorted(points.items())],
            dtype, ["full"]))
    git_commit(repo, "drafts of flopwatch new, with modes on the autograd entries; the memory comparison's sizes")
    args = ["run", "--json", "--db", str(WORK / "liger.db"), "--site", str(WORK / "liger-site"), "--budget", str(budget)]
    for name in drafts + [f"memratio_{m.op}" for m in MEMORY_OPS if (repo / "flopwatch" / f"memratio_{m.op}").exists()]:
        args += ["--variant", name]
    ran = cli(repo, *args, log="liger-run.log", out=OUT, label="[Liger-Kernel] ")
    summary = json.loads(ran.stdout) if ran.stdout.strip() else {"results": []}
    (OUT / "liger-run.json").write_text(json.dumps(summary, indent=1))
    rows = summary.get("results", [])
    judge_liger(rows, draft_records, autograd, outcome)
    judge_ratios(rows, scripts, outcome)
    floor_s = sum((r.get("phases") or {}).get("launch_floor_s", 0.0) for r in rows)
    busy = sum(d.get("busy_s", 0.0) for d in summary.get("devices", []))
    return {"drafts": len(drafts), "autograd": autograd, "results": len(rows), "floor_s": floor_s, "busy_s": busy,
            "jobs_wall_s": summary.get("jobs_wall_s")}


# -- a planted history -----------------------------------------------------------------------------

PLANTED_ENTRY = '''import torch

WORKSPACE = {workspace}  # the forward's scratch, in copies of x
REPEAT = {repeat}  # how many times the backward does its work (the same result)


class RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps):
        scratch = torch.empty(int(WORKSPACE * x.numel()), device=x.device, dtype=x.dtype)
        scratch.zero_()
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, w, rstd)
        return x * rstd * w

    @staticmethod
    def backward(ctx, dy):
        x, w, rstd = ctx.saved_tensors
        for _ in range(REPEAT):
            xhat = x * rstd
            g = dy * w
            dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
            dw = (dy * xhat).sum(0)
        return dx, dw, None


def rms_norm(x, w, eps):
    return RMSNorm.apply(x, w, eps)
'''

PLANTED_MANIFEST = '''name = "auto_rms"
op = "rms_norm"
backend = "python"
dtypes = ["fp32"]
devices = ["cuda"]
shapes = [[4096, 4096]]
modes = ["forward", "backward", "full"]

[binding]
kind = "python"
entry = "rms.py:rms_norm"
returns = true
'''

# (subject, workspace, repeat, a comment) per commit, oldest first
PLANTED_COMMITS = (
    ("an autograd RMS norm measured in three passes", 8.0, 1, ""),
    ("Reword a comment (the same memory and time)", 8.0, 1, "# the scratch is zeroed: no stale values\n"),
    ("Grow the forward's scratch by a quarter (a planted +20% peak memory)", 10.0, 1,
     "# the scratch is zeroed: no stale values\n"),
    ("Recompute the backward's terms (a planted backward-only slowdown)", 10.0, 4,
     "# the scratch is zeroed: no stale values\n"),
)


def planted_repo(root: Path, device: str = "cuda") -> list[str]:
    """The planted history's repository (PLANTED_COMMITS) on `device` (cuda; cpu rehearses the
    script's flow on a machine without a GPU); returns the SHAs, oldest first."""
    if root.exists():
        shutil.rmtree(root)
    folder = root / "kernels" / "auto_rms"
    folder.mkdir(parents=True)
    (root / "flopwatch.toml").write_text('kernels = ["kernels"]\n')
    (root / ".gitignore").write_text(".flopwatch/\n")
    (folder / "variant.toml").write_text(PLANTED_MANIFEST.replace('devices = ["cuda"]', f'devices = ["{device}"]'))
    shas = []
    for subject, workspace, repeat, comment in PLANTED_COMMITS:
        (folder / "rms.py").write_text(comment + PLANTED_ENTRY.format(workspace=workspace, repeat=repeat))
        git_commit(root, subject)
        shas.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                   check=True).stdout.strip())
    return shas


def run_planted(budget: float, outcome: Outcome, device: str = "cuda") -> dict:
    """Step 3: compare each commit with the one before, detect over what they stored, bisect the
    memory step."""
    root = WORK / "planted"
    shas = planted_repo(root, device)
    db = str(WORK / "planted.db")
    common = ["--db", db, "--budget", str(budget), "--pair-budget", "0.5", "--no-report", "--json"]
    found: dict = {}
    for i, label in ((1, "comment"), (2, "memory"), (3, "backward")):
        proc = cli(root, "compare", shas[i - 1], shas[i], *common, log=f"planted-compare-{label}.log", out=OUT,
                   label="[planted] ")
        report = json.loads(proc.stdout) if proc.stdout.strip() else {"rows": []}
        (OUT / f"planted-compare-{label}.json").write_text(json.dumps(report, indent=1))
        found[label] = {"exit": proc.returncode, "memory_regressions": report.get("memory_regressions"),
                        "rows": {r["variant"]: {"kind": r["kind"], "memory": r.get("memory", ""),
                                                "base": (r.get("base") or {}).get("peak_mem_bytes"),
                                                "head": (r.get("head") or {}).get("peak_mem_bytes")}
                                 for r in report.get("rows", [])}}
    rows = found["comment"]["rows"]
    outcome.add("planted: a comment-only commit gives 0 memory alarms", found["comment"]["memory_regressions"] == 0,
                json.dumps(rows))
    grown = {v: r for v, r in found["memory"]["rows"].items() if r["memory"]}
    planted_rows = {v: r for v, r in found["memory"]["rows"].items() if v.startswith("auto_rms")}
    growth = {v: (r["head"] / r["base"] - 1) if r["base"] and r["head"] else None for v, r in planted_rows.items()}
    outcome.add("planted: the +20% allocation is a memory regression in compare (exit 1)",
                "auto_rms" in grown and found["memory"]["exit"] == 1 and not any(
                    v.startswith("peer.") for v in grown),
                "growth: " + ", ".join(f"{v} {g:+.1%}" for v, g in growth.items() if g is not None))
    kinds = {v: r["kind"] for v, r in found["backward"]["rows"].items()}
    outcome.add("planted: a backward-only slowdown is slower in backward and full, not in forward",
                kinds.get("auto_rms[mode=backward]") == "slower" and kinds.get("auto_rms[mode=full]") == "slower"
                and kinds.get("auto_rms") not in ("slower", None), json.dumps(kinds))
    proc = cli(root, "detect", "--db", db, "--no-report", "--json", log="planted-detect.log", out=OUT,
               label="[planted] ")
    detected = json.loads(proc.stdout) if proc.stdout.strip() else {"regressions": []}
    (OUT / "planted-detect.json").write_text(json.dumps(detected, indent=1))
    steps = [(r["variant"], r["good_sha"], r["bad_sha"]) for r in detected["regressions"] if r["metric"] == "memory"]
    outcome.add("planted: the detector records the memory step (good = the commit before, bad = the plant)",
                ("auto_rms", shas[1], shas[2]) in steps
                and all((g, b) == (shas[1], shas[2]) for _, g, b in steps), json.dumps(steps))
    proc = cli(root, "bisect", "--good", shas[0], "--bad", shas[3], "--variant", "auto_rms", "--metric", "memory",
               "--db", db, "--budget", str(budget), "--no-report", "--json", log="planted-bisect.log", out=OUT,
               label="[planted] ")
    report = json.loads(proc.stdout) if proc.stdout.strip() else {"outcome": {}}
    (OUT / "planted-bisect.json").write_text(json.dumps(report, indent=1))
    first = (report.get("outcome") or {}).get("first_bad")
    outcome.add("planted: bisect --metric memory names the commit of the +20% allocation", first == shas[2],
                f"first bad {str(first)[:10]}, planted {shas[2][:10]}; {(report.get('outcome') or {}).get('message')}")
    return {"shas": shas, "compares": found, "memory_steps": steps, "bisect_first_bad": first}


def print_table(outcome: Outcome, facts: dict) -> None:
    if outcome.ratios:
        print("\nLiger-to-peer peak memory, full pass (flopwatch in Liger's terms: inputs + dy + the previous step's "
              "gradients + the pass's peak above them)")
        print(f"  {'op':28} {'x':>6} {'script':>8} {'flopwatch':>10} {'above inputs':>13}  within ±15%")
        for r in outcome.ratios:
            fw, above = r.get("flopwatch_ratio_liger_terms"), r.get("above_inputs_ratio")
            print(f"  {r['op']:28} {r['x']:>6} {r['script_ratio']:>8.3f} {(f'{fw:.3f}' if fw else '-'):>10} "
                  f"{(f'{above:.3f}' if above else '-'):>13}  {'yes' if r['within'] else 'NO'}")
    if "liger" in facts:
        f = facts["liger"]
        share = f"{100 * f['floor_s'] / f['busy_s']:.1f}% of" if f.get("busy_s") else "beside"
        print(f"\nlaunch floors: {f['floor_s']:.1f} s over {f['results']} results ({share} {f['busy_s']:.0f} s device "
              f"busy); jobs wall {f.get('jobs_wall_s')} s")
    print("\ncheck                                                                            held")
    for c in outcome.checks:
        print(f"  {c.name[:80]:80} {'yes' if c.ok else 'NO'}")
        if c.detail and not c.ok:
            print(f"      {c.detail[:600]}")
    print(f"\nevery check held: {'yes' if all(c.ok for c in outcome.checks) else 'NO'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", default=".ext", help="folder holding the Liger-Kernel checkout")
    parser.add_argument("--steps", default="liger,planted", help="liger (steps 1 and 2), planted (step 3)")
    parser.add_argument("--drafts", type=Path, default=None,
                        help="a folder with liger-drafts/ and sizes-liger-new.json (verify_sizes_gpu.py --part draft's "
                             "output): take those drafts instead of running `flopwatch new` again")
    parser.add_argument("--budget", type=float, default=0.2, help="timing budget per job (s)")
    parser.add_argument("--planted-device", default="cuda", choices=("cuda", "cpu"),
                        help="where the planted history runs (cpu: a rehearsal of the flow without a GPU, whose "
                             "memory checks cannot hold)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    steps = set(args.steps.split(","))
    outcome, facts = Outcome(), {}
    t0 = time.time()
    prepared = scripts = None
    if "liger" in steps:
        source = Path(args.repos) / "Liger-Kernel"
        if not source.is_dir():
            outcome.add(f"Liger-Kernel checkout at {source}", False, "not found")
        else:
            prepared = prepare_liger(source, args.drafts)
            # The planted history's timings wait for the scripts: nothing shares the GPU with them.
            scripts = wait_for_scripts(prepared.started)
    if "planted" in steps:
        facts["planted"] = run_planted(args.budget, outcome, args.planted_device)
    if prepared is not None:
        facts["liger"] = run_liger(prepared, scripts, args.budget, outcome)
    facts["wall_s"] = round(time.time() - t0, 1)
    (OUT / "verify-modes.json").write_text(json.dumps({"facts": facts, "ratios": outcome.ratios,
                                                       "checks": [c.__dict__ for c in outcome.checks]}, indent=1,
                                                      default=str))
    print_table(outcome, facts)
    print(f"wall {facts['wall_s']} s")
    return 0 if outcome.checks and all(c.ok for c in outcome.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
