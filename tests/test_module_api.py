"""The one raw-launch path with the vendor's names as data: the names exist in each vendor's
own headers and library, the call shapes agree across vendors, and the argument packing and
error reporting work (all on the CPU; the launches themselves run in tests/cuda and on a ROCm
node)."""

from __future__ import annotations

import ctypes
import re
import shutil
from pathlib import Path

import pytest
import torch

from workers.bindings import module_api
from workers.bindings.module_api import VENDORS, error_text, images, kernel_params, launch_argv

CALLS = ("load", "get_function", "launch", "unload", "error_name")


def _cuda_header() -> Path | None:
    nvcc = shutil.which("nvcc")
    candidates = [Path(nvcc).resolve().parent.parent / "include" / "cuda.h"] if nvcc else []
    candidates.append(Path("/usr/local/cuda/include/cuda.h"))
    return next((p for p in candidates if p.is_file()), None)


HEADERS = {"cuda": _cuda_header(), "rocm": Path("/usr/include/hip/hip_runtime_api.h")}


def _declaration(text: str, name: str) -> list[str]:
    """Parameter list of `name(...)` as declared in a C header."""
    returns = r"(?:CUresult\s+CUDAAPI|hipError_t|const\s+char\s*\*)"
    match = re.search(rf"^\s*(?:\w+\s+)?{returns}\s+{name}\s*\(([^;{{)]*)\)\s*;", text, re.MULTILINE)
    assert match, f"{name} is not declared"
    return [p.strip() for p in match.group(1).split(",")]


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_every_name_is_declared_by_the_vendor(vendor):
    header = HEADERS[vendor]
    if header is None or not header.is_file():
        pytest.skip(f"no {vendor} header here")
    text = header.read_text(errors="replace")
    api = VENDORS[vendor]
    for call in CALLS + (("current_context",) if api.current_context else ()):
        _declaration(text, getattr(api, call))


def test_the_calls_have_the_same_shape_on_both_vendors():
    if not all(h and h.is_file() for h in HEADERS.values()):
        pytest.skip("needs both cuda.h (nvcc) and hip_runtime_api.h (libamdhip64-dev)")
    texts = {v: HEADERS[v].read_text(errors="replace") for v in VENDORS}
    for call in ("load", "get_function", "launch", "unload"):
        params = {v: _declaration(texts[v], getattr(VENDORS[v], call)) for v in VENDORS}
        assert len(params["cuda"]) == len(params["rocm"]), (call, params)
    launch = _declaration(texts["rocm"], VENDORS["rocm"].launch)
    assert len(launch) == 11 and launch[-2:] == ["void** kernelParams", "void** extra"]
    # cuGetErrorName returns through a pointer, hipGetErrorName returns the string
    assert len(_declaration(texts["cuda"], "cuGetErrorName")) == 2 and VENDORS["cuda"].error_by_out_param
    assert len(_declaration(texts["rocm"], "hipGetErrorName")) == 1 and not VENDORS["rocm"].error_by_out_param


def test_hip_library_exports_every_name():
    try:
        lib = ctypes.CDLL("libamdhip64.so")
    except OSError:
        pytest.skip("libamdhip64 not installed (libamdhip64-dev)")
    for call in CALLS:
        getattr(lib, getattr(VENDORS["rocm"], call))
    assert error_text(VENDORS["rocm"], lib, 1) == "hipErrorInvalidValue"


def test_launch_arguments_are_typed_like_the_declarations():
    _, params = kernel_params([torch.zeros(2), 3])
    argv = launch_argv([4, 2, 1], (256, 1, 1), 1024, 0xABC, params)
    assert len(argv) == 10  # after the function handle
    assert [a.value for a in argv[:7]] == [4, 2, 1, 256, 1, 1, 1024]
    assert all(isinstance(a, ctypes.c_uint) for a in argv[:7])
    assert argv[7].value == 0xABC and argv[8] is params and argv[9].value is None
    with pytest.raises(ValueError):
        launch_argv([4, 2], (256, 1, 1), 0, 0, params)


def test_kernel_params_point_at_typed_values():
    t = torch.arange(4, dtype=torch.float32)
    holders, params = kernel_params([t, 7, 2.5])
    assert len(params) == 3 and len(holders) == 3
    assert ctypes.cast(params[0], ctypes.POINTER(ctypes.c_void_p)).contents.value == t.data_ptr()
    assert ctypes.cast(params[1], ctypes.POINTER(ctypes.c_int)).contents.value == 7
    assert ctypes.cast(params[2], ctypes.POINTER(ctypes.c_float)).contents.value == 2.5
    with pytest.raises(TypeError):
        kernel_params(["M"])
    with pytest.raises(TypeError):
        kernel_params([True])


class _OutParamLib:
    """cuGetErrorName's calling convention, without a driver."""

    @staticmethod
    def cuGetErrorName(code, out):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = b"CUDA_ERROR_INVALID_IMAGE"
        return 0


def test_error_text_and_check_for_both_conventions():
    assert error_text(VENDORS["cuda"], _OutParamLib(), 200) == "CUDA_ERROR_INVALID_IMAGE"
    with pytest.raises(module_api.ModuleError, match=r"cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE \(200\)"):
        module_api.check(VENDORS["cuda"], _OutParamLib(), 200, "cuModuleLoadData")
    module_api.check(VENDORS["cuda"], _OutParamLib(), 0, "fine")


def test_device_code_is_picked_per_vendor_and_arch(tmp_path: Path):
    for name in ("kernel.fatbin", "variant-gfx942.hsaco", "variant-gfx950.hsaco", "libvariant.so"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in images(VENDORS["cuda"], tmp_path)] == ["kernel.fatbin"]
    assert [p.name for p in images(VENDORS["rocm"], tmp_path, "gfx942")] == ["variant-gfx942.hsaco"]
    assert images(VENDORS["rocm"], tmp_path, "gfx90a") == []
