"""The `triton` back end: compile plans from `[triton]` tables (pure), manifest validation, and
real ahead-of-time builds of the suite's Triton variants for sm_90a and gfx942 (no GPU)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.project.config import ProjectConfig, load_config
from pipeline.project.manifest import ManifestError, load_variant
from workers.triton_aot.spec import SpecError, compile_jobs, parse_arch

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "BLOCK_M", "BLOCK_N"]
CONST = {"BLOCK_M", "BLOCK_N"}
TABLE = {"kernel": "k", "signature": {"a_ptr": "*{dtype}", "b_ptr": "*{dtype}", "c_ptr": "*fp32"},
         "constexprs": {"BLOCK_M": 64, "BLOCK_N": 32}, "num_warps": 4, "divisible_by_16": ["K"]}


def test_parse_arch():
    assert (parse_arch("sm_90a").backend, parse_arch("sm_90a").arch) == ("cuda", 90)
    assert (parse_arch("sm_80").arch, parse_arch("sm_80").warp_size) == (80, 32)
    assert (parse_arch("gfx942").backend, parse_arch("gfx942").warp_size) == ("hip", 64)
    with pytest.raises(SpecError, match="not a Triton target"):
        parse_arch("native")


def test_plain_kernel_one_job_per_arch_and_dtype():
    jobs = compile_jobs(TABLE, "k", ARGS, CONST, None, ["sm_90a", "gfx942"], ["bf16", "fp16"])
    assert [j.label for j in jobs] == ["k[bf16]@sm_90a", "k[fp16]@sm_90a", "k[bf16]@gfx942", "k[fp16]@gfx942"]
    j = jobs[1]
    assert j.signature == {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                           "K": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    assert j.constexprs == {"BLOCK_M": 64, "BLOCK_N": 32}
    assert j.options == {"num_warps": 4}
    # pointers (torch allocations) and the listed integers are specialised like the JIT does
    assert sorted(j.attrs) == [0, 1, 2, 5]


def test_autotune_configs_override_constexprs_and_options():
    configs = [{"kwargs": {"BLOCK_M": 128, "BLOCK_N": 64, "waves_per_eu": 2}, "num_warps": 8, "num_stages": 2},
               {"kwargs": {"BLOCK_M": 32, "BLOCK_N": 32}, "num_warps": 2, "num_stages": None}]
    jobs = compile_jobs({**TABLE, "constexprs": {}}, "k", ARGS, CONST, configs, ["gfx942"], ["bf16"])
    assert len(jobs) == 2
    assert jobs[0].constexprs == {"BLOCK_M": 128, "BLOCK_N": 64}
    assert jobs[0].options == {"num_warps": 8, "num_stages": 2, "waves_per_eu": 2}
    assert jobs[0].label == "k[bf16,BLOCK_M=128,BLOCK_N=64,w8,s2]@gfx942"
    assert jobs[1].options == {"num_warps": 2}


@pytest.mark.parametrize("table, message", [
    ({"kernel": "k", "constexprs": {"BLOCK_M": 1}}, r"\['BLOCK_N'\] of k have no value"),
    ({"kernel": "k", "signature": {"x_ptr": "*fp32"}, "constexprs": {"BLOCK_M": 1, "BLOCK_N": 1}}, "x_ptr"),
    ({"kernel": "k", "divisible_by_16": ["BLOCK_M"], "constexprs": {"BLOCK_M": 1, "BLOCK_N": 1}}, "runtime parameter"),
])
def test_spec_errors_name_the_key(table, message):
    with pytest.raises(SpecError, match=message):
        compile_jobs(table, "k", ARGS, CONST, None, ["sm_90a"], ["bf16"])


MANIFEST = """
name = "t"
op = "gemm"
backend = "triton"
sources = ["k.py"]
dtypes = ["bf16"]
shapes = [[64, 64, 64]]
[binding]
kind = "triton"
entry = "k.py:gemm_nt"
"""


def _write(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "kernels" / "gemm" / "t"
    folder.mkdir(parents=True)
    (folder / "k.py").write_text("# kernel\n")
    (folder / "variant.toml").write_text(text)
    return folder / "variant.toml"


def test_manifest_triton_table_loads(tmp_path):
    v = load_variant(tmp_path, _write(tmp_path, MANIFEST + '[triton]\nkernel = "k"\nnum_warps = 4\n'), ProjectConfig())
    assert v.backend == "triton" and v.binding.kind == "triton"
    assert v.triton == {"kernel": "k", "num_warps": 4}
    assert v.devices == ("cuda", "rocm")  # Triton runs on GPUs only


def test_a_triton_module_needs_no_triton_table(tmp_path):
    """A Triton module as repositories have it: its kernels are analysed from Triton's JIT at
    run time (`workers.job.triton_jit`), so the ahead-of-time table is optional."""
    v = load_variant(tmp_path, _write(tmp_path, MANIFEST), ProjectConfig())
    assert v.backend == "triton" and v.triton == {} and v.devices == ("cuda", "rocm")


@pytest.mark.parametrize("extra, key", [
    ('[triton]\nkernel = "k"\nwarps = 4\n', "triton.warps"),
    ('[triton]\nkernel = "k"\nnum_warps = 0\n', "triton.num_warps"),
    ('[triton]\nkernel = "k"\nsignature = { a_ptr = 3 }\n', "triton.signature.a_ptr"),
    ('[triton]\nkernel = "k"\n', "devices"),  # with devices = ["cpu"]: GPUs only
])
def test_manifest_triton_table_errors(tmp_path, extra, key):
    top = 'devices = ["cpu"]\n' if key == "devices" else ""
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, _write(tmp_path, top + MANIFEST + extra), ProjectConfig())
    assert err.value.key == key


def test_triton_table_only_for_the_triton_backend(tmp_path):
    text = MANIFEST.replace('backend = "triton"', 'backend = "python"').replace('kind = "triton"', 'kind = "python"')
    with pytest.raises(ManifestError, match="only for backend"):
        load_variant(tmp_path, _write(tmp_path, text + '[triton]\nkernel = "k"\n'), ProjectConfig())


triton = pytest.importorskip("triton", reason="triton not installed (scripts/setup.sh installs it)")


def _build(name: str):
    from workers.backends.build import build_variant
    from workers.toolkit.bundle import pack

    v = load_variant(ROOT, ROOT / "kernels" / "gemm" / name / "variant.toml", load_config(ROOT))
    return v, build_variant(v, pack(ROOT, [v.folder]), "test")[0]


def test_triton_tiled_builds_and_is_analysed_for_sm90a_and_gfx942():
    _, record = _build("triton_tiled")
    assert record.ok, record.first_errors
    assert record.toolchain == f"triton:triton {triton.__version__}"
    rows = record.analysis["kernels"]
    nv, amd = rows["gemm_tiled_kernel[bf16]@sm_90a"], rows["gemm_tiled_kernel[bf16]@gfx942"]
    assert nv["registers"] > 0 and nv["spill_stores"] == 0
    # Triton's shared memory is dynamic (its metadata): the static figure is ptxas's, the
    # allocation adds the dynamic part and the driver's 1 KiB, in 128-byte granules
    assert nv["smem_dynamic_bytes"] >= 2 * (128 * 64 + 128 * 64)  # at least two stages of bf16 A and B tiles
    assert nv["smem_alloc_bytes"] == -(-(nv["smem_bytes"] + nv["smem_dynamic_bytes"] + 1024) // 128) * 128
    if shutil.which("llvm-readelf-19") or shutil.which("llvm-readelf"):
        assert amd["vgprs"] > 0 and amd["lds_dynamic_bytes"] > 0
        assert amd["lds_bytes"] == -(-(amd["lds_static_bytes"] + amd["lds_dynamic_bytes"]) // 512) * 512
        if shutil.which("llvm-objdump-19") or shutil.which("llvm-objdump"):
            assert amd["mfma_insts"] > 0  # tl.dot on bf16 became MFMA
    else:
        assert "llvm-readelf" in amd["analysis_error"]


def test_triton_autotuned_compiles_every_configuration():
    from workers.bindings.python_entry import import_file
    from workers.triton_aot.spec import describe_kernel

    v, record = _build("triton_autotuned")
    assert record.ok, record.first_errors
    module = import_file(ROOT / v.folder / "gemm_autotuned.py", "autotuned_under_test")
    _, configs = describe_kernel(module.gemm_autotuned_kernel)
    rows = record.analysis["kernels"]
    assert len(rows) == len(configs) * len(v.arches)
    assert all(r["registers"] > 0 for k, r in rows.items() if k.endswith("@sm_90a"))


def test_triton_compile_error_is_build_failed_with_the_line(tmp_path):
    from workers.backends.build import build_variant
    from workers.toolkit.bundle import pack

    folder = tmp_path / "kernels" / "gemm" / "t"
    folder.mkdir(parents=True)
    (folder / "k.py").write_text(
        "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n"
        "    tl.store(x_ptr + tl.arange(0, BLOCK), undefined_name)\n")
    (folder / "variant.toml").write_text(MANIFEST.replace('dtypes = ["bf16"]', 'dtypes = ["fp32"]') +
                                         '[triton]\nkernel = "k"\nsignature = { x_ptr = "*fp32" }\n'
                                         'constexprs = { BLOCK = 64 }\n')
    v = load_variant(tmp_path, folder / "variant.toml", ProjectConfig())
    record, artifact = build_variant(v, pack(tmp_path, [v.folder]), "h")
    assert not record.ok and artifact == {}
    assert "undefined_name" in record.first_errors


def test_native_arch_needs_a_gpu_on_the_build_node():
    from workers.backends.triton import resolve_arches
    from workers.measure.device import gpu_kind

    assert resolve_arches(["sm_90a", "gfx942"]) == ["sm_90a", "gfx942"]
    if gpu_kind() is None:
        with pytest.raises(RuntimeError, match="needs a GPU"):
            resolve_arches(["native"])
    else:
        (native,) = resolve_arches(["native"])
        assert parse_arch(native)
