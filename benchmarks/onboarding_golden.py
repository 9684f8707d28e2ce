"""What `flopwatch new` / `init` draft, kept as files, so that two versions of the onboarding
code can be compared byte for byte (a restructuring must draft the same).

`write` onboards copies of public repositories (and the test fixture tests/ecosystem_repo) as a
user would, one case per command line below, each in a fresh copy at a fixed path under WORK,
and keeps under OUT/<case>/ every file the command wrote or changed (`files/`), its `--json`
output (`stdout.json`), its stderr and exit status. `diff` compares two such folders and prints
one line per case, then the differing files; it exits 1 when any differs.

    python3 benchmarks/onboarding_golden.py write /tmp/golden-before --code /tmp/flopwatch-main
    python3 benchmarks/onboarding_golden.py write /tmp/golden-after
    python3 benchmarks/onboarding_golden.py diff /tmp/golden-before /tmp/golden-after

`--code` is the flopwatch tree to run (default: this one; a `git archive` of another commit
works); `--ext` the folder of checkouts (KernelBench, Liger-Kernel, extension-cpp,
flash-attention-minimal, fp32_sgemm_amd, reference-kernels: a case whose checkout is missing is skipped, and says
so); `--build` adds the cases that build each draft here (the small repositories).
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELBENCH_FILES = [f"KernelBench/level1/{p}.py" for p in (
    "1_Square_matrix_multiplication_", "19_ReLU", "23_Softmax", "40_LayerNorm", "47_Sum_reduction_over_a_dimension",
    "63_conv_standard_2D__square_input__square_kernel")] + [
    "src/kernelbench/prompts/model_new_ex_add.py", "src/kernelbench/prompts/few_shot/model_new_ex_tiled_matmul.py"]
# case → (checkout: a folder of --ext, or "@ecosystem" for the test fixture; the command's arguments)
CASES = {
    "ecosystem_init": ("@ecosystem", ["init", "--no-build", "--json"]),
    "ecosystem_new": ("@ecosystem", ["new", "pkg", "problems", "solutions", "ext", "dotted", "--no-build", "--json",
                                     "--out", "drafted"]),
    "liger_new": ("Liger-Kernel", ["new", "src/liger_kernel/transformers/functional.py", "--no-build", "--json"]),
    "extension_cpp_init": ("extension-cpp", ["init", "--no-build", "--json"]),
    "sgemm_amd_init": ("fp32_sgemm_amd", ["init", "--no-build", "--json"]),
    "flash_minimal_new": ("flash-attention-minimal", ["new", "bench.py", "--no-build", "--json"]),
    "flash_minimal_sources_new": ("flash-attention-minimal", ["new", "flash.cu", "main.cpp", "--no-build", "--json"]),
    "kernelbench_new": ("KernelBench", ["new", *KERNELBENCH_FILES, "--no-build", "--json"]),
    "liger_init": ("Liger-Kernel", ["init", "--no-build", "--json"]),
    "reference_kernels_init": ("reference-kernels", ["init", "--no-build", "--json"]),
    "reference_kernels_new": ("reference-kernels", ["new", "problems/pmpp/vectoradd_py", "problems/pmpp/matmul_py",
                                                    "--no-build", "--json"]),
}
BUILD_CASES = {
    "ecosystem_init_build": ("@ecosystem", ["init", "--json"]),
    "extension_cpp_init_build": ("extension-cpp", ["init", "--json"]),
    "sgemm_amd_init_build": ("fp32_sgemm_amd", ["init", "--json"]),
    "flash_minimal_new_build": ("flash-attention-minimal", ["new", "bench.py", "--json"]),
}


def _snapshot(folder: Path) -> dict[str, str]:
    out = {}
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and ".git" not in rel.parts:
            out[rel.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def run_case(name: str, source: Path, args: list[str], code: Path, work: Path, out: Path, seed: str) -> str:
    repo = work / name
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(source, repo, symlinks=True)
    before = _snapshot(repo)
    env = {**os.environ, "PYTHONPATH": str(code), "PYTHONHASHSEED": seed, "RAY_USAGE_STATS_ENABLED": "0"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=repo, env=env, capture_output=True,
                          text=True, check=False)
    wall = time.monotonic() - started
    kept = out / name
    if kept.exists():
        shutil.rmtree(kept)
    (kept / "files").mkdir(parents=True)
    after = _snapshot(repo)
    changed = sorted(rel for rel, digest in after.items() if before.get(rel) != digest)
    for rel in changed:
        target = kept / "files" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / rel, target)
    (kept / "stdout.json").write_text(proc.stdout)
    (kept / "stderr.txt").write_text(proc.stderr)
    (kept / "exit_status.txt").write_text(f"{proc.returncode}\n")
    (kept / "command.txt").write_text(" ".join(["flopwatch", *args]) + "\n")
    try:
        drafts = len(json.loads(proc.stdout.strip().splitlines()[-1])["drafts"]) if proc.stdout.strip() else 0
    except (ValueError, KeyError, IndexError):
        drafts = -1
    return f"{name:28s} exit {proc.returncode}  {drafts:3d} drafts  {len(changed):3d} files written  {wall:6.1f} s"


def write(args) -> int:
    cases = dict(CASES)
    if args.build:
        cases.update(BUILD_CASES)
    if args.only:
        cases = {k: v for k, v in cases.items() if k in args.only}
    args.out.mkdir(parents=True, exist_ok=True)
    code = args.code.resolve()
    for name, (checkout, command) in cases.items():
        source = code / "tests" / "ecosystem_repo" if checkout == "@ecosystem" else args.ext / checkout
        if not source.is_dir():
            print(f"{name:28s} skipped: no checkout at {source}")
            continue
        print(run_case(name, source, command, code, args.work, args.out, args.seed), flush=True)
    return 0


def _files(folder: Path) -> dict[str, Path]:
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}


def diff(args) -> int:
    before = {p.name for p in args.before.iterdir() if p.is_dir()}
    after = {p.name for p in args.after.iterdir() if p.is_dir()}
    for case in sorted(before ^ after):
        print(f"{case:28s} not compared: run only {'before' if case in before else 'after'}")
    cases = sorted(before & after)
    different = 0
    details = []
    for case in cases:
        a, b = _files(args.before / case), _files(args.after / case)
        names = sorted(set(a) | set(b))
        bad = [n for n in names if n not in a or n not in b or a[n].read_bytes() != b[n].read_bytes()]
        print(f"{case:28s} {'identical' if not bad else f'{len(bad)} of {len(names)} files differ'} ({len(names)} files)")
        different += bool(bad)
        for n in bad:
            if n not in a or n not in b:
                details.append(f"--- {case}/{n}: only in {'after' if n not in a else 'before'}")
                continue
            details += difflib.unified_diff(a[n].read_text(errors="replace").splitlines(),
                                            b[n].read_text(errors="replace").splitlines(),
                                            f"before/{case}/{n}", f"after/{case}/{n}", lineterm="", n=1)
    if details:
        print()
        print("\n".join(details[:args.lines]))
    print(f"{len(cases) - different} of {len(cases)} cases identical")
    return 1 if different else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="onboard every case and keep what was written")
    w.add_argument("out", type=Path)
    w.add_argument("--code", type=Path, default=ROOT, help="the flopwatch tree to run (default: this one)")
    w.add_argument("--ext", type=Path, default=Path(os.environ.get("FLOPWATCH_EXT", ROOT / ".ext")),
                   help="the folder of public checkouts (default: $FLOPWATCH_EXT, else the repository's .ext)")
    w.add_argument("--work", type=Path, default=Path("/tmp/onboarding-golden-work"),
                   help="where the copies are made (a fixed path: absolute paths in the output then agree)")
    w.add_argument("--build", action="store_true", help="add the cases that build each draft here")
    w.add_argument("--only", nargs="*", help="only these cases")
    w.add_argument("--seed", default="0", help="PYTHONHASHSEED of the runs")
    d = sub.add_parser("diff", help="compare two folders `write` made")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    d.add_argument("--lines", type=int, default=400, help="diff lines shown at most")
    args = p.parse_args(argv)
    return write(args) if args.command == "write" else diff(args)


if __name__ == "__main__":
    sys.exit(main())
