"""Onboard public PyTorch-world repositories as a new user would, on one GPU, in one command:
`flopwatch new` on the files that hold the kernels (no hand-written shim), the hand edits this
script lists (each one line of one draft, printed), then `flopwatch run` at default settings.

The repositories are checkouts the caller provides (this machine cannot fetch them): a folder
holding any of

  flash-attention-minimal/   tspeterkim/flash-attention-minimal: a torch C++/CUDA extension
                             (main.cpp + flash.cu) that bench.py builds with load() and calls
                             as O = minimal_attn.forward(q, k, v)
  KernelBench/               ScalingIntelligence/KernelBench: level-1 problems (class Model,
                             get_inputs) and the CUDA example solutions (ModelNew + load_inline)
  Liger-Kernel/              linkedin/Liger-Kernel: Triton kernels behind functional entries
                             (liger_rms_norm(X, W, eps), liger_swiglu(a, b)), each checked against
                             the reference flopwatch finds (a built-in op, a `_ref` by name, a
                             test's assert_close), its tests under test/ kept in the checkout
  extension-cpp/             pytorch/extension-cpp: PyTorch's custom C++/CUDA operator tutorial
                             (setup.py choosing CUDAExtension or CppExtension, TORCH_LIBRARY ops
                             wrapped in extension_cpp/ops.py), onboarded with `flopwatch init`

Full outputs (drafts, run summaries, logs) go to OUT (default ./gpu-verify-ecosystem); a table
per repository comes last, and the exit status says whether every variant that was meant to
run did so with a % of peer.

    python3 benchmarks/verify_ecosystem_gpu.py --repos .ext [--only KernelBench]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from verify_ops_gpu import cli, git_commit  # the same helpers as the ops verification (this folder)

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "gpu-verify-ecosystem"))


@dataclass(frozen=True)
class Onboarding:
    """One repository: the files given to `flopwatch new`, the one-line hand edits (draft
    folder, old text, new text, why), and the variants expected to end `ok`."""

    name: str
    files: tuple[str, ...]
    edits: tuple[tuple[str, str, str, str], ...] = ()
    expect_ok: tuple[str, ...] = ()
    expect_not_ok: dict = field(default_factory=dict)  # variant → why it is expected to fail
    command: str = "new"  # or "init": every kernel source of the repository (files unused)
    # Counts the onboarding must reach, whatever the names: drafts that name a reference
    # (a built-in op, the repository's own callable), and rows `ok` with a % of peer.
    min_with_reference: int = 0
    min_ok: int = 0


LEVEL1 = ("KernelBench/level1/1_Square_matrix_multiplication_.py", "KernelBench/level1/23_Softmax.py",
          "KernelBench/level1/40_LayerNorm.py", "KernelBench/level1/47_Sum_reduction_over_a_dimension.py",
          "KernelBench/level1/19_ReLU.py", "KernelBench/level1/63_conv_standard_2D__square_input__square_kernel.py")
REPOS = (
    Onboarding("flash-attention-minimal", ("bench.py",), expect_ok=("minimal_attn",)),
    Onboarding("KernelBench", (*LEVEL1, "src/kernelbench/prompts/model_new_ex_add.py",
                               "src/kernelbench/prompts/few_shot/model_new_ex_tiled_matmul.py"),
               edits=(("1_Square_matrix_multiplication_", "file = \"../../KernelBench/level1/1_Square_matrix_multiplication_.py\"",
                       "file = \"../../KernelBench/level1/1_Square_matrix_multiplication_.py\"\nflops = \"2*N*N*N\"",
                       "a problem file does not say its FLOPs: one line makes the row TFLOP/s"),
                      ("63_conv_standard_2D__square_input__square_kernel",
                       "file = \"../../KernelBench/level1/63_conv_standard_2D__square_input__square_kernel.py\"",
                       ("file = \"../../KernelBench/level1/63_conv_standard_2D__square_input__square_kernel.py\"\n"
                        "flops = \"2*batch_size*out_channels*(height-kernel_size+1)*(width-kernel_size+1)*in_channels"
                        "*kernel_size*kernel_size\""), "the convolution's FLOPs, likewise")),
               expect_ok=("1_Square_matrix_multiplication_", "23_Softmax", "40_LayerNorm",
                          "47_Sum_reduction_over_a_dimension", "19_ReLU",
                          "63_conv_standard_2D__square_input__square_kernel", "model_new_ex_add",
                          "model_new_ex_tiled_matmul")),
    Onboarding("Liger-Kernel", ("src/liger_kernel/transformers/functional.py",),
               expect_ok=("liger_rms_norm", "liger_swiglu", "liger_softmax"), min_with_reference=25, min_ok=20),
    Onboarding("extension-cpp", (), command="init", expect_ok=("mymuladd", "mymul", "myadd_out")),
)


def apply_edits(repo: Path, spec: Onboarding) -> list[str]:
    done = []
    for folder, old, new, why in spec.edits:
        path = repo / "flopwatch" / folder / "variant.toml"
        text = path.read_text()
        if old not in text:
            done.append(f"{folder}: edit not applied ({old!r} not in the draft)")
            continue
        path.write_text(text.replace(old, new, 1))
        done.append(f"{folder}: {old!r} -> {new!r} ({why})")
    return done


def onboard(source: Path, spec: Onboarding, budget: float | None, drafted_already: bool,
            variants: tuple[str, ...] = (), reference: str = "") -> dict:
    repo = OUT / spec.name
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns(".git"))
    git_commit(repo, f"{spec.name} as fetched")
    if drafted_already:  # drafted by `flopwatch new` elsewhere (it needs no GPU): the drafts as they are
        drafts = {"drafts": [{"variant": p.name, "op": "", "state": "drafted before"}
                             for p in sorted((repo / "flopwatch").glob("*")) if p.is_dir()]}
    else:
        drafted = cli(repo, spec.command, *spec.files, "--no-build", "--json", log=f"{spec.name}-{spec.command}.log",
                      out=OUT, label=f"[{spec.name}] ")
        drafts = json.loads(drafted.stdout) if drafted.stdout.strip() else {"drafts": []}
    (OUT / f"{spec.name}-new.json").write_text(json.dumps(drafts, indent=1))
    edits = apply_edits(repo, spec)
    git_commit(repo, "drafts of flopwatch new" + (" with the listed edits" if edits else ""))
    args = ["run", "--json", "--db", str(OUT / f"{spec.name}.db"), "--site", str(OUT / f"{spec.name}-site")]
    if budget:
        args += ["--budget", str(budget)]
    if reference:  # only the drafts checked against a built-in op, or only the others
        variants = tuple(d["variant"] for d in drafts.get("drafts", [])
                         if (d.get("reference") or "").startswith("built-in") == (reference == "builtin"))
    for name in variants:  # only these drafts (and their ops' peers)
        args += ["--variant", name]
    ran = cli(repo, *args, log=f"{spec.name}-run.log", out=OUT, label=f"[{spec.name}] ")
    summary = json.loads(ran.stdout) if ran.stdout.strip() else {"results": []}
    (OUT / f"{spec.name}-run.json").write_text(json.dumps(summary, indent=1))
    return {"drafts": drafts.get("drafts", []), "edits": edits, "summary": summary}


def table(spec: Onboarding, outcome: dict) -> bool:
    print(f"\n== {spec.name}: {len(outcome['drafts'])} draft(s); edits: {outcome['edits'] or 'none'}")
    for d in outcome["drafts"]:
        guessed = d.get("guessed") or []
        print(f"  drafted {d['variant']} ({d['op']}, {d['state']})" + (f"; guesses: {guessed}" if guessed else ""))
    rows = outcome["summary"].get("results", [])
    print(f"  {'variant':44} {'shape':34} {'dtype':5} {'status':12} {'throughput':>14} {'% peer':>7} {'median':>10}")
    for r in sorted(rows, key=lambda r: (r["op"], r["shape"], not r["peer"], r["variant"])):
        rate = r.get("rate")
        shown = "" if not rate else (f"{rate / 1e12:.2f} TFLOP/s" if r.get("flops") else f"{rate / 1e9:.0f} GB/s")
        pct = f"{r['pct_of_peer']:.1f}%" if r.get("pct_of_peer") else ""
        median = f"{r['median_s'] * 1e3:.3f} ms" if r.get("median_s") else ""
        name = r["variant"] + (" (built-in peer)" if r.get("backend") == "builtin" else " (peer)" if r["peer"] else "")
        print(f"  {name[:44]:44} {r['shape'][:34]:34} {r['dtype']:5} {r['status']:12} {shown:>14} {pct:>7} {median:>10}")
        if r["status"] != "ok":
            print(f"      {r['diagnostic'][:300]}")
    status = {r["variant"]: r for r in rows if not r.get("peer") or r["variant"] in spec.expect_ok}
    good = True
    for name in spec.expect_ok:
        r = status.get(name)
        fine = r is not None and r["status"] == "ok" and (r.get("pct_of_peer") or r.get("peer"))
        good = good and bool(fine)
        print(f"  expected ok with a % of peer: {name}: {'yes' if fine else 'NO'}")
    for name, why in spec.expect_not_ok.items():
        r = status.get(name)
        print(f"  expected to fail: {name} ({why}): {r['status'] if r else 'not run'}")
    if spec.min_with_reference:
        named = [d for d in outcome["drafts"] if has_reference(d)]
        print(f"  drafts with a named reference: {len(named)} of {len(outcome['drafts'])} "
              f"(at least {spec.min_with_reference}: {'yes' if len(named) >= spec.min_with_reference else 'NO'})")
        good = good and len(named) >= spec.min_with_reference
    if spec.min_ok:
        fine = sorted({r["variant"] for r in rows if not r.get("peer") and r["status"] == "ok" and r.get("pct_of_peer")})
        print(f"  ok with a % of peer: {len(fine)} (at least {spec.min_ok}: {'yes' if len(fine) >= spec.min_ok else 'NO'})"
              f": {', '.join(fine)}")
        good = good and len(fine) >= spec.min_ok
    return good


def has_reference(draft: dict) -> bool:
    """Whether a draft of `new --json` names a reference: a built-in op, or the repository's
    own callable (the draft's "reference" line; "none found — measured as unchecked" names none)."""
    ref = draft.get("reference") or ""
    return bool(ref) and not ref.startswith("none")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", default=".ext", help="folder holding the repository checkouts")
    parser.add_argument("--only", action="append", help="onboard only these repositories")
    parser.add_argument("--budget", type=float, help="timing budget per job (default: flopwatch's)")
    parser.add_argument("--drafted", action="store_true", help="the checkouts hold their drafts already: run them")
    parser.add_argument("--variant", action="append", default=[],
                        help="run only these drafts of the repository named with --only (repeatable)")
    parser.add_argument("--reference", choices=("builtin", "repository"), default="",
                        help="run only the drafts (of the repository named first with --only) whose reference is "
                             "a built-in op, or only those whose reference is the repository's own (or none)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    outcomes = {}
    for spec in REPOS:
        source = Path(args.repos) / spec.name
        if (args.only and spec.name not in args.only) or not source.is_dir():
            continue
        outcomes[spec.name] = onboard(source, spec, args.budget, args.drafted,
                                      *((tuple(args.variant), args.reference) if spec.name == (args.only or [""])[0]
                                        else ((), "")))
    ok = True
    for spec in REPOS:
        if spec.name in outcomes:
            ok = table(spec, outcomes[spec.name]) and ok
    print(f"\nevery expected variant ok with a % of peer: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
