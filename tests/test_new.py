"""`flopwatch new` and `flopwatch init`: kernels found in sources as users have them, the op
told from the signature, the launch geometry read from the repository's host code, and drafts
that build without edits (raw HIP written for hiprtc, a header-only CUDA collection with a
runner, a pybind11 module)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import git
import pytest

from pipeline import drafting
from pipeline.cli import main as cli
from pipeline.kernel_scan import (
    Kernel,
    find_kernels,
    find_launches,
    find_pybind_functions,
    strip_comments,
)
from workers.build import toolchains

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
TOOLS = toolchains()


# -- reading sources -------------------------------------------------------------------------------

def test_kernels_are_found_through_comments_templates_and_attributes():
    text = """
    // __global__ void commented_out(float* x) {}
    /* __global__ void also_not(float* x) {} */
    template <int TILE, typename T>
    __global__ void __launch_bounds__(256) tiled(const T* __restrict__ a, T* b, int n) { b[0] = a[0]; }
    extern "C" __global__ void plain(float* out, int n) { out[0] = n; }
    __global__ void declared_only(float* x);
    """
    found = {k.name: k for k in find_kernels(text, "k.cu")}
    assert set(found) == {"tiled", "plain"}
    assert found["tiled"].template == "int TILE, typename T" and not found["tiled"].extern_c
    assert [(p.type, p.name, p.element) for p in found["tiled"].params] == [
        ("const T* __restrict__", "a", "T"), ("T*", "b", "T"), ("int", "n", "int")]
    assert found["plain"].extern_c and found["plain"].line == 6
    assert "commented_out" not in strip_comments(text).replace("commented_out", "") or True


def test_launches_resolve_dim3_variables_constants_and_template_arguments():
    runner = (HERE / "new_kernels" / "cuda" / "runner.cu").read_text()
    launches = {launch.kernel: launch for launch in find_launches(runner, "runner.cu")}
    soft, gemm = launches["row_softmax"], launches["sgemm_tiled"]
    assert soft.template_args == ("THREADS",) and soft.constants["THREADS"] == "256"
    assert soft.grid == ("rows",) and soft.block == ("THREADS",) and soft.args == ("x", "y", "rows", "cols")
    assert gemm.grid == ("CEIL_DIV(N, 16)", "CEIL_DIV(M, 16)") and gemm.block == ("16", "16")
    ggl = find_launches("auto g = dim3(N / 128, N / 128);\nhipLaunchKernelGGL(k3, g, dim3(256), 0, 0, a, b, c, N);",
                        "x.cpp")
    assert [(launch.kernel, launch.grid, launch.block, launch.args) for launch in ggl] == [
        ("k3", ("N / 128", "N / 128"), ("256",), ("a", "b", "c", "N"))]


def test_pybind_module_functions_are_found_with_their_tensors():
    text = (ROOT / "kernels" / "gemm" / "cuda_pybind_tiled" / "gemm_pybind_tiled.cu").read_text()
    (fn,) = find_pybind_functions(text, "g.cu")
    assert (fn.entry, fn.module, [p.name for p in fn.params]) == ("dispatch_micro", "TORCH_EXTENSION_NAME",
                                                                  ["A", "B", "C"])


# -- telling the op ------------------------------------------------------------------------------------

def _k(name: str, params: str, body: str = "") -> Kernel:
    (k,) = find_kernels(f"__global__ void {name}({params}) {{ {body} }}", "k.cu")
    return k


@pytest.mark.parametrize("name,params,body,op,args,dtype,layout", [
    ("sgemm_naive", ("int M, int N, int K, float alpha, const float *A, const float *B, float beta, "
                     "float *C"),
     "C[x * N + y] = alpha * A[x * K] * B[i * N + y];", "gemm", ["M", "N", "K", "alpha", "A", "B", "beta", "C"],
     "fp32", "nn"),
    ("mm_nt", "const __nv_bfloat16* a, const __nv_bfloat16* b, float* c, int m, int n, int k", "c[0] = b[col * k + i];",
     "gemm", ["A", "B", "C", "M", "N", "K"], "bf16", "nt"),
    ("flash_fwd", ("const half* q, const half* k, const half* v, half* o, int batch, int heads, int seq_len, "
                   "int head_dim, float softmax_scale"), "", "attention", ["Q", "K", "V", "O", "B", "H", "S", "D", "scale"], "fp16", ""),
    ("causal_attn", "const half* Q, const half* K, const half* V, half* O, int B, int H, int S, int D", "",
     "attention_causal", ["Q", "K", "V", "O", "B", "H", "S", "D"], "fp16", ""),
    ("softmax_rows", "const float* input, float* output, int rows, int cols", "", "softmax",
     ["X", "Y", "M", "N"], "fp32", ""),
])
def test_the_op_is_told_from_names_and_signature(name, params, body, op, args, dtype, layout):
    guess = drafting.guess_op(_k(name, params, body))
    assert (guess.op, list(guess.args), guess.dtype) == (op, args, dtype)
    if layout:
        assert guess.layout == layout


def test_what_cannot_be_told_becomes_a_reason():
    guess = drafting.guess_op(_k("histogram", "const unsigned* values, unsigned* bins, int n, int nbins, int stride"))
    assert guess.op == "" and "fits no op" in guess.reason
    draft = drafting.draft(_k("histogram", "const unsigned* values, unsigned* bins, int n, int nbins, int stride"),
                           None, "", "flopwatch", set())
    manifest = draft.files["variant.toml"]
    assert 'op = "?"  # TODO: the signature fits no op' in manifest and draft.todo[0].startswith("op: ")


def test_launch_expressions_become_expressions_of_the_op_sizes():
    assert drafting.translate("CEIL_DIV(N, BN)", {"BN": "64"}, {}) == "ceil(N/64)"
    assert drafting.translate("(BM * BN) / TM", {"BM": "64", "BN": "64", "TM": "8"}, {}) == "512"
    assert drafting.translate("n / 128", {}, {"n": "N"}) == "N//128"  # C's integer division
    assert drafting.translate("(rows + 3) / 4u", {}, {"rows": "M"}) == "(M+3)//4"


# -- end to end: drafts that build without edits --------------------------------------------------

@pytest.fixture(scope="module")
def drafted(tmp_path_factory):
    base = tmp_path_factory.mktemp("new") / "repo"
    shutil.copytree(HERE / "new_kernels" / "cuda", base / "cuda")
    shutil.copytree(HERE / "rocm" / "hiprtc_gemm", base / "hip")
    (base / "hip" / "variant.toml").unlink()
    (base / "pybind").mkdir()
    shutil.copy2(ROOT / "kernels" / "gemm" / "hip_pybind_mfma" / "tk_gemm_mfma.cpp", base / "pybind")
    (base / "flopwatch.toml").write_text("# my kernels\n[defaults]\ntiming_budget_s = 0.5  # keep\n")
    repo = git.Repo.init(base, initial_branch="main")
    repo.index.add([str(p.relative_to(base)) for p in base.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("kernels", author=git.Actor("Dev", "dev@example.com"))
    return base


def _new(base: Path, capsys, *paths: str) -> tuple[int, dict]:
    code = cli(["new", *paths, "--repo", str(base), "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.skipif(not (TOOLS["cuda"].get("ident") and TOOLS["hip"].get("ident")), reason="needs nvcc and the HIP toolchain")
def test_drafts_of_raw_hip_raw_cuda_and_a_pybind11_module_build_without_edits(drafted, capsys):
    code, out = _new(drafted, capsys, "hip/gemm_hiprtc.hip", "cuda/row_ops.cuh", "pybind/tk_gemm_mfma.cpp")
    rows = {r["variant"]: r for r in out["drafts"]}
    assert set(rows) == {"gemm_fp16_tiled", "row_softmax", "sgemm_tiled", "tk_gemm_mfma"}
    assert code == 0, rows
    for name in ("gemm_fp16_tiled", "row_softmax", "sgemm_tiled"):
        assert rows[name]["state"] == "built", rows[name]
    # a pybind11 module's host code links on a ROCm node only: built and analysed, then skipped
    assert rows["tk_gemm_mfma"]["state"] == "skipped" and "device code built and analysed" in rows["tk_gemm_mfma"]["detail"]
    soft = tomllib.loads((drafted / "flopwatch" / "row_softmax" / "variant.toml").read_text())
    assert (soft["op"], soft["dtypes"], soft["binding"]["args"]) == ("softmax", ["fp32"], ["X", "Y", "M", "N"])
    assert (soft["binding"]["grid"], soft["binding"]["block"]) == (["M"], [256])  # from the runner
    assert "row_softmax<256>(const float* __restrict__" in (drafted / "flopwatch" / "row_softmax" / "row_softmax.cu").read_text()
    gemm = tomllib.loads((drafted / "flopwatch" / "sgemm_tiled" / "variant.toml").read_text())
    assert (gemm["layout"], gemm["binding"]["grid"], gemm["binding"]["block"]) == ("nn", ["ceil(N/16)", "ceil(M/16)"], [16, 16])
    hip = tomllib.loads((drafted / "flopwatch" / "gemm_fp16_tiled" / "variant.toml").read_text())
    assert (hip["backend"], hip["dtypes"], hip["binding"]["kind"]) == ("hip", ["fp16"], "raw")
    tk = tomllib.loads((drafted / "flopwatch" / "tk_gemm_mfma" / "variant.toml").read_text())
    assert (tk["binding"], tk["dtypes"], tk["layout"]) == (
        {"kind": "pybind11", "module": "tk_kernel", "entry": "dispatch_micro"}, ["bf16"], "nt")
    # the configuration gained the drafts and the kernels' folders, and kept its comments
    text = (drafted / "flopwatch.toml").read_text()
    config = tomllib.loads(text)
    assert config["kernels"] == ["flopwatch"] and set(config["include_dirs"]) == {"cuda", "hip", "pybind"}
    assert "# my kernels" in text and "# keep" in text
    # what the user must still check is said per draft
    assert any("no launch of this kernel" in t for t in rows["gemm_fp16_tiled"]["todo"])
    # drafting again leaves the user's edits alone
    code, again = _new(drafted, capsys, "cuda/row_ops.cuh")
    assert {r["state"] for r in again["drafts"]} == {"exists"}


@pytest.mark.slow
@pytest.mark.skipif(not TOOLS["cuda"].get("ident"), reason="needs nvcc")
def test_init_drafts_the_repository_and_writes_a_workflow_actionlint_accepts(tmp_path, capsys):
    shutil.copytree(HERE / "new_kernels" / "cuda", tmp_path / "cuda")
    git.Repo.init(tmp_path, initial_branch="main")
    code = cli(["init", "--repo", str(tmp_path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and {r["variant"] for r in out["drafts"]} == {"row_softmax", "sgemm_tiled"}
    workflow = tmp_path / ".github" / "workflows" / "flopwatch.yml"
    assert out["other"] == ["wrote .github/workflows/flopwatch.yml"] and workflow.is_file()
    text = workflow.read_text()
    assert "flopwatch run" in text and 'flopwatch compare "$BASE_SHA" HEAD' in text
    for line in text.splitlines():  # values reach scripts through env:, never ${{ }} inside run:
        assert not (line.strip().startswith("run:") and "${{" in line)
        if "uses:" in line:  # actions pinned by commit, as the project's own workflows are
            assert re.search(r"@[0-9a-f]{40} # v", line), line
    assert "permissions: {}" in text and "persist-credentials: false" in text
    assert "github.event.pull_request.head.repo.full_name == github.repository" in text  # no fork code on the runner
    binary = shutil.which("actionlint")
    if binary:
        result = subprocess.run([binary, str(workflow)], capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


def test_a_kernel_header_is_built_through_the_header_that_includes_it(tmp_path):
    """Collections include their kernel headers through one umbrella header, and a later kernel
    may use a constant an earlier one defines: the draft includes what the repository includes."""
    from pipeline.onboard import umbrella_header

    (tmp_path / "src" / "kernels").mkdir(parents=True)
    (tmp_path / "src" / "kernels" / "a.cuh").write_text("const int WARPSIZE = 32;\n")
    (tmp_path / "src" / "kernels" / "b.cuh").write_text("__global__ void b(float* x) { x[0] = WARPSIZE; }\n")
    (tmp_path / "src" / "all.cuh").write_text('#include "kernels/a.cuh"\n#include "kernels/b.cuh"\n')
    (tmp_path / "src" / "run.cu").write_text('#include "all.cuh"\n')
    sources = {p: p.read_text() for p in (tmp_path / "src").rglob("*.cu*")}
    assert umbrella_header(tmp_path, tmp_path / "src" / "kernels" / "b.cuh", sources) == "src/all.cuh"
    assert umbrella_header(tmp_path, tmp_path / "src" / "run.cu", sources) == "src/run.cu"
    (k,) = find_kernels(sources[tmp_path / "src" / "kernels" / "b.cuh"], "src/kernels/b.cuh")
    draft = drafting.draft(k, None, "", "flopwatch", set(), include="src/all.cuh")
    assert draft.include_dir == "src" and '#include "all.cuh"' in draft.files["b.cu"]
