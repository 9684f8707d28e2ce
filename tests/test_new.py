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

from pipeline.cli import main as cli
from pipeline.onboarding import drafting, onboard
from pipeline.onboarding.kernel_scan import (
    Kernel,
    find_function,
    find_kernels,
    find_launches,
    find_pybind_functions,
    strip_comments,
    type_aliases,
)
from workers.backends.build import toolchains

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
    stripped = strip_comments(text)  # comments blanked in place: the kernels' line numbers hold
    assert "commented_out" not in stripped and "also_not" not in stripped and "tiled(" in stripped
    assert len(stripped) == len(text) and stripped.count("\n") == text.count("\n")


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


def test_module_functions_through_wrappers_with_return_types_and_definitions_elsewhere():
    main = (HERE / "new_kernels" / "torch_ext_attention" / "csrc" / "main.cpp").read_text()
    (fn,) = find_pybind_functions(main, "main.cpp")
    assert (fn.name, fn.entry, fn.module, fn.returns, [p.name for p in fn.params]) == (
        "forward", "forward", "TORCH_EXTENSION_NAME", "torch::Tensor", ["Q", "K", "V"])
    flash = (HERE / "new_kernels" / "torch_ext_attention" / "csrc" / "flash.cu").read_text()
    assert find_function(main, "forward", definition=True) is None  # main.cpp only declares it
    params, returns, line = find_function(flash, "forward", definition=True)
    assert (returns, line, [p.type for p in params]) == ("torch::Tensor", 55, ["torch::Tensor"] * 3)
    assert find_function("void g() { int y = f(2); return f(3); }", "f") is None  # calls are no declarations


def test_a_launch_knows_its_host_function_and_the_sizes_it_reads_off_tensors():
    flash = (HERE / "new_kernels" / "torch_ext_attention" / "csrc" / "flash.cu").read_text()
    (launch,) = find_launches(flash, "flash.cu")
    assert (launch.caller, launch.grid, launch.block, launch.constants["Bc"]) == ("forward", ("B", "nh"), ("Bc",), "32")
    assert launch.tensor_sizes == {"B": ("Q", 0), "nh": ("Q", 1), "N": ("Q", 2), "d": ("Q", 3)}
    copy = (ROOT / "kernels" / "copy" / "cuda_coalesced" / "copy_coalesced.cu").read_text()
    (launch,) = find_launches(copy, "copy.cu")
    assert launch.locals == {"blocks": "(n + 255) / 256"}
    (kernel,) = find_kernels(copy, "copy.cu")
    grid, block, _, why = drafting.launch_geometry(launch, kernel, ("src", "dst", "n"), ("n",), {}, "copy")
    assert (grid, block, why) == (["(n+255)//256"], [256], "")
    assert type_aliases("typedef __half fw_half;\nusing bf = __nv_bfloat16;") == {"fw_half": "__half",
                                                                               "bf": "__nv_bfloat16"}


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


def test_what_cannot_be_told_is_a_guess_marked_on_its_line():
    kernel = _k("histogram", "const unsigned* values, unsigned* bins, int n, int nbins, int stride")
    guess = drafting.guess_op(kernel)
    assert (guess.op, guess.args, guess.dtype) == ("copy", ("src", "dst", "n"), "fp32")
    assert guess.reason.startswith("the signature fits no op")
    draft = drafting.draft(kernel, None, "", "flopwatch", set())
    text = draft.files["variant.toml"]
    manifest = tomllib.loads(text)
    assert (manifest["op"], manifest["dtypes"], manifest["binding"]["args"]) == ("copy", ["fp32"], ["src", "dst", "n"])
    assert 'op = "copy"  # TODO (guess): the signature fits no op; copy\'s arguments match best' in text
    assert ('dtypes = ["fp32"]  # TODO (guess): the element type \'unsigned int\' is no fp32, fp16 or bf16, and no '
            'script tells') in text
    assert ('args = ["src", "dst", "n"]  # TODO (guess): nbins, stride are no copy argument: flopwatch cannot launch '
            'histogram as it is') in text
    assert draft.guessed == ("op", "binding.args", "dtypes", "binding.grid", "binding.block")
    assert draft.todo[0].startswith("op (guess): the signature fits no op")


def test_a_pointer_type_gives_the_dtype_even_when_the_op_is_a_guess():
    guess = drafting.guess_op(_k("step", "const float* state, float* next, int n, int steps, float dt"))
    assert (guess.op, guess.dtype, dict(guess.guesses)["op"].startswith("the signature fits no op")) == (
        "copy", "fp32", True)
    assert "dtypes" not in dict(guess.guesses)


def test_drafts_are_named_after_their_files_when_kernel_symbols_repeat():
    kernels = [*find_kernels("__global__ void matmul_kernel(float* c) {}", "k/naive.cpp"),
               *find_kernels("__global__ void matmul_kernel(float* c) {}\n__global__ void zero(float* c) {}",
                             "k/double_buffer.cpp"),
               *find_kernels("__global__ void matmul_kernel(float* c) {}", "other/naive.cpp"),
               *find_kernels("__global__ void softmax(float* c) {}", "k/softmax.cu")]
    assert drafting.base_names(kernels) == ["naive", "double_buffer_matmul_kernel", "zero", "naive", "softmax"]
    taken: set[str] = set()
    names = [drafting.variant_name(k, taken, base) for k, base in zip(kernels, drafting.base_names(kernels))]
    assert names == ["naive", "double_buffer_matmul_kernel", "zero", "naive_2", "softmax"]
    # a wrapper never shadows the file it includes
    (soft,) = find_kernels("__global__ void s(const float* x, float* y, int rows, int cols) {}", "k/softmax.cu")
    draft = drafting.draft(soft, None, "", "flopwatch", set(), base="softmax")
    assert set(draft.files) == {"variant.toml", "softmax_draft.cu"}
    assert '#include "softmax.cu"' in draft.files["softmax_draft.cu"]


def test_a_script_launch_becomes_geometry_in_the_op_sizes():
    from pipeline.onboarding.python_scan import PyLaunch

    kernel = _k("mm", "const float* A, const float* B, float* C, int M, int N, int K")
    launch = PyLaunch(kernel="mm", grid=("ceil(args.N/128)", "(args.M+63)//64"), block=("256",), shared="64*32*4",
                      args=("A", "B", "C", "args.M", "args.N", "args.K"), file="bench.py", line=9, api="cupy")
    grid, block, table, why = drafting.launch_geometry(launch, kernel, ("A", "B", "C", "M", "N", "K"),
                                                       ("M", "N", "K"), {}, "gemm", "nn")
    assert (grid, block, table, why) == (["ceil(N/128)", "(M+63)//64"], [256],
                                         {"dynamic_smem_bytes": 8192, "block_threads": 256}, "")
    # sizes read off a tensor passed as one of the op's: A.shape[0] is M (A is M×K)
    launch = PyLaunch(kernel="mm", grid=("ceil(A.shape[0]/64)",), block=("64",), shared="0",
                      args=("A", "B", "C", "M", "N", "K"), file="bench.py", line=9, api="cupy")
    assert drafting.launch_geometry(launch, kernel, ("A", "B", "C", "M", "N", "K"), ("M", "N", "K"), {},
                                    "gemm", "nn")[0] == ["ceil(M/64)"]


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
    from pipeline.onboarding.onboard import umbrella_header

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


# -- kernels launched from Python, and torch extensions --------------------------------------------

@pytest.fixture
def ecosystem(tmp_path) -> Path:
    """A repository holding a hiprtc harness (kernels/*.cpp each defining `matmul_kernel`, run by
    bench.py), a cupy kernel, and a torch extension whose kernel only its exported forward launches."""
    base = tmp_path / "repo"
    for name in ("hiprtc_bench", "torch_ext_attention", "cupy_softmax"):
        shutil.copytree(HERE / "new_kernels" / name, base / name)
    git.Repo.init(base, initial_branch="main")
    return base


def test_kernels_a_python_harness_compiles_are_named_after_their_files_and_launched_as_it_launches(ecosystem, capsys):
    code, out = _new(ecosystem, capsys, "hiprtc_bench/kernels", "--no-build")
    rows = {r["variant"]: r for r in out["drafts"]}
    assert code == 0
    assert {name: r["guessed"] for name, r in rows.items()} == {
        "clear_output": ["op", "binding.grid", "binding.block"], "double_buffer_matmul_kernel": [],
        "lds_tiling": [], "naive": []}
    for name in ("naive", "lds_tiling", "double_buffer_matmul_kernel"):
        folder = ecosystem / "flopwatch" / name
        manifest = tomllib.loads((folder / "variant.toml").read_text())
        assert (manifest["backend"], manifest["op"], manifest["layout"], manifest["dtypes"], manifest["shapes"]) == (
            "hip", "gemm", "nn", ["bf16"], [[4096, 4096, 2048]])  # bf16 and the sizes from bench.py's argparse
        assert manifest["binding"] == {"kind": "raw", "entry": "matmul_kernel", "args": ["A", "B", "C", "M", "N", "K"],
                                       "grid": ["(N+64-1)//64", "ceil(M/64)"], "block": [256]}
        assert manifest["launch"] == {"block_threads": 256}
    assert '#include "naive.cpp"' in (ecosystem / "flopwatch" / "naive" / "naive.hip").read_text()
    # the file's other kernel is built as the harness builds the file: with hiprtc, for AMD
    clear = tomllib.loads((ecosystem / "flopwatch" / "clear_output" / "variant.toml").read_text())
    assert (clear["backend"], clear["op"], clear["binding"]["args"]) == ("hip", "copy", ["dst", "n"])
    assert any(t.startswith("op (guess): the signature fits no op; copy's arguments match best (C→dst, count→n)")
               for t in rows["clear_output"]["todo"])


@pytest.mark.slow
@pytest.mark.skipif(not TOOLS["hip"].get("ident"), reason="needs the HIP toolchain")
def test_a_python_harness_s_kernels_build_for_gfx942_as_drafted(ecosystem, capsys):
    code, out = _new(ecosystem, capsys, "hiprtc_bench/kernels/naive.cpp", "hiprtc_bench/kernels/lds_tiling.cpp")
    assert code == 0 and {r["variant"]: r["state"] for r in out["drafts"]} == {"naive": "built", "lds_tiling": "built"}


def test_a_cupy_launch_gives_geometry_shared_memory_and_sizes(ecosystem, capsys):
    code, out = _new(ecosystem, capsys, "cupy_softmax/softmax.cu", "--no-build")
    assert code == 0 and [r["guessed"] for r in out["drafts"]] == [[]]
    manifest = tomllib.loads((ecosystem / "flopwatch" / "softmax_rows" / "variant.toml").read_text())
    assert (manifest["op"], manifest["dtypes"], manifest["shapes"]) == ("softmax", ["fp32"], [[4096, 1024], [8192, 4096]])
    assert (manifest["binding"]["grid"], manifest["binding"]["block"], manifest["launch"]) == (
        ["M"], [256], {"dynamic_smem_bytes": 1024, "block_threads": 256})


def test_a_kernel_only_an_exported_wrapper_launches_is_measured_through_the_module(ecosystem, capsys):
    code, out = _new(ecosystem, capsys, "torch_ext_attention/csrc/flash.cu", "--no-build")
    assert code == 0 and out["notes"] == [("forward_kernel: launched by forward (exported by the module in "
                                           "torch_ext_attention/csrc/main.cpp): measured through that draft")]
    (row,) = out["drafts"]
    assert (row["variant"], row["op"], row["guessed"], row["todo"]) == ("main", "attention", [], [])
    folder = ecosystem / "flopwatch" / "main"
    manifest = tomllib.loads((folder / "variant.toml").read_text())
    # forward(Q, K, V) returns O; its kernel's `const float*` gives the dtype, bench.py's q the shape
    assert manifest["binding"] == {"kind": "pybind11", "module": "minimal_attn", "entry": "forward", "returns": True,
                                   "args": ["Q", "K", "V"]}
    assert (manifest["backend"], manifest["dtypes"], manifest["shapes"]) == ("cuda", ["fp32"], [[16, 12, 64, 64]])
    wrapper = (folder / "main.cu").read_text()
    assert '#include "main.cpp"' in wrapper and '#include "flash.cu"' in wrapper  # flash.cu defines forward


def test_sources_a_torch_extension_builds_are_drafted_as_its_module_functions(ecosystem, capsys):
    (ecosystem / "torch_ext_attention" / "build.py").write_text(
        "from torch.utils.cpp_extension import load\n"
        "minimal_attn = load(name='minimal_attn', sources=['csrc/main.cpp', 'csrc/flash.cu'])\n")
    sources = onboard.torch_extension_sources(ecosystem)
    assert sources == {"torch_ext_attention/csrc/main.cpp": "torch_ext_attention/build.py:2",
                       "torch_ext_attention/csrc/flash.cu": "torch_ext_attention/build.py:2"}
    files = [ecosystem / s for s in sorted(sources)]
    assert onboard.plan(ecosystem, files, "flopwatch", skip_files=set(sources)) == onboard.Plan([], [])
    code, out = _new(ecosystem, capsys, "torch_ext_attention/csrc")
    assert code == 0 and [(d["variant"], d["op"]) for d in out["drafts"]] == [("minimal_attn", "attention")]
    assert out["notes"] == [("torch_ext_attention/csrc/flash.cu, torch_ext_attention/csrc/main.cpp: a torch extension "
                             "built by torch_ext_attention/build.py:2 (torch.utils.cpp_extension): drafted as "
                             'backend = "torch" variants of the functions its module exports or the TORCH_LIBRARY '
                             'operators it registers ([[extensions]] from = "torch_ext_attention/build.py"); its '
                             "__global__ kernels are measured through them, not as kernels of their own")]


def test_out_as_an_absolute_path_is_that_folder_and_one_outside_the_repository_is_refused(tmp_path, capsys):
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    shutil.copytree(HERE / "new_kernels" / "cuda", repo / "cuda")
    git.Repo.init(repo, initial_branch="main")
    code = cli(["new", "cuda/row_ops.cuh", "--repo", str(repo), "--out", str(elsewhere), "--no-build", "--json"])
    captured = capsys.readouterr()
    assert code == 2 and f"--out {elsewhere}: outside the repository" in captured.err, captured
    assert not elsewhere.exists() and not (repo / str(elsewhere).lstrip("/")).exists()  # never ./abs/path
    assert not (repo / "flopwatch.toml").exists()
    inside = repo / "bench" / "drafts"
    code = cli(["new", "cuda/row_ops.cuh", "--repo", str(repo), "--out", str(inside), "--no-build", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and (inside / "row_softmax" / "variant.toml").is_file(), out
    assert tomllib.loads((repo / "flopwatch.toml").read_text())["kernels"] == ["bench/drafts"]
    assert not (repo / str(inside).lstrip("/")).exists()
