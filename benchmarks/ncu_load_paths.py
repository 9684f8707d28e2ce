"""Record, on one NVIDIA GPU, how kernels move global memory into the SM, for the coalescing
figure: Nsight Compute's metric list for the chip (which global-load paths it can count) and a
raw `--csv --page raw` report of each kernel below with the LSU global-load (LDG), asynchronous
copy (LDGSTS, `cp.async`) and TMA metrics it has, beside the ones flopwatch's table reads.

    python3 benchmarks/ncu_load_paths.py [CASE ...]  # OUT=... (default ./ncu-load-paths)

Kernels (each launched once inside the NVTX range flopwatch profiles): the bundled Triton flash
attention (kernels/attention/triton_flash) at B=2, H=16, S=4096 and B=4, H=16, S=1024 (D=64,
fp16); the bundled Triton GEMM (kernels/gemm/triton_tiled, 4096³ bf16); torch's contiguous
copy (`torch.mul(src, 1, out=dst)`, the `torch_copy` peer), a copy reading every 8th element
(a strided gather) and torch.matmul (cuBLAS, 4096³ bf16). The CSVs are kept as test fixtures
(tests/fixtures/ncu/) with this script as their provenance.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "ncu-load-paths"))
CASES = ("flash_b2_s4096", "flash_b4_s1024", "triton_gemm", "torch_copy", "strided_copy", "torch_matmul")
# Metric families that count global loads per path (names as ncu --query-metrics lists them).
_PATHS = re.compile(r"^(l1tex__t_(requests|sectors)_pipe_lsu_mem_global_op_(ld|ldgsts)\w*"
                    r"|smsp__sass_(data_bytes|inst_executed)_mem_global_op_(ld|ldgsts)\w*"
                    r"|smsp__sass_inst_executed_op_(ldgsts|global_ld)\w*"
                    r"|l1tex__m_xbar2l1tex_read_(bytes|sectors)\w*"
                    r"|smsp__inst_executed_op_(tma|ldgsts|utma)\w*"
                    r"|l1tex__t_\w*tma\w*|sm__\w*tma\w*)$")


def inner(case: str) -> None:
    """Run one case's kernel: warm-up outside the range, one launch inside it."""
    import torch

    sys.path.insert(0, str(ROOT))
    from workers.bindings.python_entry import import_file

    torch.manual_seed(0)
    dev = "cuda"
    if case.startswith("flash"):
        flash = import_file(ROOT / "kernels/attention/triton_flash/flash.py", "flash_under_profile")
        b, s = (2, 4096) if case == "flash_b2_s4096" else (4, 1024)
        q, k, v = (torch.randn(b, 16, s, 64, device=dev, dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        run = lambda: flash.attention(q, k, v, o)  # noqa: E731
    elif case == "triton_gemm":
        gemm = import_file(ROOT / "kernels/gemm/triton_tiled/gemm_tiled.py", "gemm_under_profile")
        a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        bt = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        c = torch.empty(4096, 4096, device=dev, dtype=torch.float32)
        run = lambda: gemm.gemm_nt(a, bt, c)  # noqa: E731
    elif case == "torch_copy":
        src = torch.randn(1 << 26, device=dev)
        dst = torch.empty_like(src)
        run = lambda: torch.mul(src, 1, out=dst)  # noqa: E731
    elif case == "strided_copy":
        src = torch.randn(1 << 26, device=dev)
        dst = torch.empty(1 << 23, device=dev)
        run = lambda: dst.copy_(src[::8])  # noqa: E731
    else:
        a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        run = lambda: torch.matmul(a, a.T)  # noqa: E731
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("flopwatch:timed")
    run()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--inner":
        inner(sys.argv[2])
        return 0
    sys.path.insert(0, str(ROOT))
    from workers.cuda import metrics, ncu
    from workers.cuda.toolchain import find_ncu

    OUT.mkdir(parents=True, exist_ok=True)
    tool = find_ncu()
    if not tool:
        print("ncu not found")
        return 1
    listed = subprocess.run([tool, "--query-metrics", "--chip", "gh100"], capture_output=True, text=True, check=False)
    (OUT / "query_metrics_gh100.txt").write_text(listed.stdout + listed.stderr)
    names = sorted({line.split()[0] for line in listed.stdout.splitlines() if line.split()
                    and _PATHS.match(line.split()[0])})
    print(f"{len(names)} load-path metrics of gh100: {names}")
    wanted = list(dict.fromkeys([*metrics.required_metrics(metrics.load_table("sm90")),
                                 *(f"{n}.sum" for n in names)]))
    (OUT / "metrics_asked.json").write_text(json.dumps(wanted, indent=1))
    summary = {}
    cases = [c for c in sys.argv[1:] if c in CASES] or list(CASES)
    for case in cases:
        csv_path = OUT / f"{case}.csv"
        for _ in range(8):  # a name ncu cannot collect as `.sum` (a ratio) is dropped, and the case rerun
            argv = ncu.ncu_command(tool, wanted, [sys.executable, __file__, "--inner", case],
                                   output_csv=str(csv_path))
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
            bad = re.findall(r"Failed to find metric ([\w.]+)", proc.stdout + proc.stderr)
            if not bad:
                break
            print(f"{case}: ncu cannot collect {bad}: dropped")
            wanted = [w for w in wanted if w not in bad and w.split(".")[0] not in {b.split(".")[0] for b in bad}]
        (OUT / f"{case}.log").write_text(" ".join(argv) + "\n" + proc.stdout[-20000:] + proc.stderr[-20000:])
        try:
            launches = ncu.parse_raw_csv(csv_path.read_text())
        except (OSError, ValueError) as exc:
            print(f"{case}: no report ({exc}); exit {proc.returncode}: {proc.stderr[-600:]}")
            continue
        for launch in launches:
            keys = [k for k in launch.metrics if "global_op" in k or "tma" in k or "ldgsts" in k]
            summary.setdefault(case, []).append({"kernel": launch.kernel[:80],
                                                 **{k: launch.metrics[k] for k in sorted(keys)}})
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1))
    for case, rows in summary.items():
        for row in rows:
            print(f"\n== {case}: {row['kernel']}")
            for k, v in row.items():
                if k != "kernel" and v:
                    print(f"   {k} = {v:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
