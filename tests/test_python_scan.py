"""pipeline.onboarding.conventions.py_launch and script_values: launches, tensors and sizes read from Python scripts as kernel
collections write them (a hiprtc harness looping over a folder of kernels, cupy, cuda-python,
a bench script taking its sizes from argparse), without running them."""

from __future__ import annotations

from pipeline.onboarding.conventions.py_launch import python_launches
from pipeline.onboarding.conventions.script_values import python_calls, script_sizes, script_tensors
from pipeline.onboarding.source.records import PyCall, PyLaunch, TensorMade

# A hiprtc harness: every kernels/*.cpp defines `matmul_kernel`; the runner globs the folder,
# compiles each file with hiprtc and launches it through hip-python with positional arguments.
HIPRTC_RUNNER = '''
import ctypes
from pathlib import Path

import torch
from hip import hip, hiprtc

KERNELS = Path(__file__).parent / "kernels"
BLOCK_M, BLOCK_N = 128, 64


def check(result):
    err, *values = result
    if err != hip.hipError_t.hipSuccess:
        raise RuntimeError(err)
    return values[0] if len(values) == 1 else values


def load(path):
    source = path.read_text()
    program = check(hiprtc.hiprtcCreateProgram(source.encode(), path.name.encode(), 0, [], []))
    check(hiprtc.hiprtcCompileProgram(program, 1, [b"--offload-arch=gfx942"]))
    code = bytearray(check(hiprtc.hiprtcGetCodeSize(program)))
    check(hiprtc.hiprtcGetCode(program, code))
    module = check(hip.hipModuleLoadData(code))
    return check(hip.hipModuleGetFunction(module, b"matmul_kernel"))


def run(path, M, N, K):
    kernel = load(path)
    a = torch.randn((M, K), dtype=torch.float16, device="cuda")
    b = torch.randn((N, K), dtype=torch.float16, device="cuda")
    c = torch.empty((M, N), dtype=torch.float32, device="cuda")
    grid_x = (N + BLOCK_N - 1) // BLOCK_N
    grid_y = (M + BLOCK_M - 1) // BLOCK_M
    lds_bytes = (BLOCK_M + BLOCK_N) * 32 * 2
    extra = (ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()), ctypes.c_void_p(c.data_ptr()),
             ctypes.c_int(M), ctypes.c_int(N), ctypes.c_int(K))
    check(hip.hipModuleLaunchKernel(kernel, grid_x, grid_y, 1, 256, 1, 1, lds_bytes, None, None, extra))


if __name__ == "__main__":
    for path in sorted(KERNELS.glob("*.cpp")):
        for size in (2048, 8192):
            run(path, size, size, size)
'''

# The same harness written with os.listdir and a list of names, as many harnesses are.
LISTDIR_RUNNER = '''
import os
from hip import hip, hiprtc

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "gemms")


def compile_one(text, name):
    prog = hiprtc.hiprtcCreateProgram(text.encode(), b"k.cpp", 0, [], [])[1]
    module = hip.hipModuleLoadData(prog)[1]
    return hip.hipModuleGetFunction(module, name.encode())[1]


for fname in sorted(os.listdir(SRC)):
    if not fname.endswith(".cpp"):
        continue
    with open(os.path.join(SRC, fname)) as f:
        kernel = compile_one(f.read(), "gemm")
    hip.hipModuleLaunchKernel(kernel, *(64, 64, 1), *(256, 1, 1), sharedMemBytes=0, stream=None,
                              kernelParams=None, extra=(1, 2, 3))
'''

# cupy: a kernel in the script's own text, looked up by a name expression of a template, with
# the grid from math.ceil and a ceil-division written out.
CUPY_SCRIPT = '''
import math

import cupy as cp

SOURCE = r"""
template <int TM, int TN>
__global__ void gemm_tiled(const float* a, const float* b, float* c, int M, int N, int K) { }
"""
module = cp.RawModule(code=SOURCE, options=("-std=c++17",), name_expressions=["gemm_tiled<64, 32>"])
gemm = module.get_function("gemm_tiled<64, 32>")


def launch(a, b, c, M, N, K):
    gemm((math.ceil(N / 32), (M + 63) // 64), (256,), (a, b, c, cp.int32(M), cp.int32(N), cp.int32(K)),
         shared_mem=64 * 32 * 4)
'''

# cuda-python's driver API: the kernel from a .cu file next to the script, kernelParams given as
# (values, types), a 1-D grid from triton.cdiv.
CUDA_PYTHON = '''
import ctypes

import numpy as np
import triton
from cuda import cuda, nvrtc

with open("src/vector_add.cu") as handle:
    source = handle.read()
err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"vector_add.cu", 0, [], [])
err, module = cuda.cuModuleLoadData(ptx)
err, kernel = cuda.cuModuleGetFunction(module, b"vector_add")
n = 1 << 24
x = np.random.randn(n).astype(np.float32)
params = ((d_x, d_y, n), (None, None, ctypes.c_int))
cuda.cuLaunchKernel(kernel, triton.cdiv(n, 1024), 1, 1, 1024, 1, 1, 0, stream, params, 0)
'''

# A bench script taking its sizes and dtype from argparse.
BENCH = '''
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--seq-len", type=int, default=2048)
parser.add_argument("--hidden", "-H", dest="hidden_size", type=int, default=4096)
parser.add_argument("--dtype", default="bfloat16", choices=["float16", "bfloat16"])
args = parser.parse_args()
dtype = getattr(torch, args.dtype)

x = torch.randn(args.batch, args.seq_len, args.hidden_size, dtype=dtype, device="cuda")
w = torch.ones(args.hidden_size, device="cuda").half()
out = torch.empty_like(x)
scores = (torch.rand(1024, 1024) / 10).to(torch.float16)
M, N, K = 4096, 4096, 1024
for rows in [1024, 2048, 8192]:
    t = torch.zeros(rows, N)
'''


def test_a_hiprtc_harness_launches_every_kernel_file_its_runner_globs():
    (launch,) = python_launches("bench/run.py", HIPRTC_RUNNER)
    assert launch == PyLaunch(kernel="matmul_kernel", grid=("(N+64-1)//64", "(M+128-1)//128"), block=("256",),
                              shared="(128+64)*32*2", args=("a", "b", "c", "M", "N", "K"), file="bench/run.py",
                              line=39, api="hip", sources=("bench/kernels/*.cpp",))


def test_a_listdir_harness_resolves_the_folder_and_the_name_passed_down():
    (launch,) = python_launches("tools/bench.py", LISTDIR_RUNNER)
    assert (launch.kernel, launch.sources, launch.grid, launch.block, launch.args) == (
        "gemm", ("gemms/*",), ("64", "64"), ("256",), ("1", "2", "3"))


def test_cupy_name_expressions_give_template_arguments_and_the_source_is_inline():
    (launch,) = python_launches("cupy_gemm.py", CUPY_SCRIPT)
    assert (launch.kernel, launch.template_args, launch.api, launch.sources) == ("gemm_tiled", ("64", "32"), "cupy", ())
    assert "__global__ void gemm_tiled" in launch.inline
    assert (launch.grid, launch.block, launch.shared) == (("ceil(N/32)", "(M+63)//64"), ("256",), "64*32*4")
    assert launch.args == ("a", "b", "c", "M", "N", "K")


def test_cuda_python_kernel_params_and_a_relative_source_path():
    (launch,) = python_launches("examples/add.py", CUDA_PYTHON)
    assert (launch.kernel, launch.api, launch.grid, launch.block, launch.args) == (
        "vector_add", "cuda", ("ceil(n/1024)",), ("1024",), ("d_x", "d_y", "n"))
    # a plain relative path is tried from the script's folder and from the repository root
    assert launch.sources == ("examples/src/vector_add.cu", "src/vector_add.cu")


def test_tensors_with_dtypes_through_variables_conversions_and_defaults():
    assert script_tensors("bench.py", BENCH) == [
        TensorMade("x", (8, 2048, 4096), "bf16", True, "torch.randn", 14),
        TensorMade("w", (4096,), "fp16", True, "torch.ones", 15),
        TensorMade("out", (8, 2048, 4096), "bf16", True, "torch.empty_like", 16),
        TensorMade("scores", (1024, 1024), "fp16", True, "torch.rand", 17),
        TensorMade("t", ("rows", 4096), "fp32", False, "torch.zeros", 20),
    ]


def test_sizes_from_assignments_loops_and_argparse():
    assert script_sizes("bench.py", BENCH) == {
        "batch": [8], "seq_len": [2048], "hidden_size": [4096], "M": [4096], "N": [4096], "K": [1024],
        "rows": [1024, 2048, 8192]}


def test_sizes_of_a_function_come_from_its_calls():
    sizes = script_sizes("bench/run.py", HIPRTC_RUNNER)
    assert (sizes["M"], sizes["N"], sizes["K"], sizes["size"]) == ([2048, 8192],) * 4
    assert sizes["BLOCK_M"] == [128] and sizes["BLOCK_N"] == [64]


def test_numpy_tensors_and_their_conversions():
    assert script_tensors("examples/add.py", CUDA_PYTHON) == [
        TensorMade("x", (16777216,), "fp32", True, "numpy.random.randn", 14)]


def test_module_calls_resolve_imports():
    text = "import tk_kernel as tk\nimport torch\nA = torch.randn(8, 8)\ntk.dispatch_micro(A, B, C, mode='x')\n"
    calls = [c for c in python_calls("t.py", text) if c.callee.startswith("tk_kernel")]
    assert calls == [PyCall("tk_kernel.dispatch_micro", ("A", "B", "C"), {"mode": "'x'"}, 4)]


def test_text_that_is_not_python_reads_as_nothing():
    broken = "def f(:\n    pass\n"
    assert (python_launches("x.py", broken), script_tensors("x.py", broken), script_sizes("x.py", broken),
            python_calls("x.py", broken)) == ([], [], {}, [])
