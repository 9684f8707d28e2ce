"""Time every GEMM of kernels/ on an AMD GPU: each file is compiled at run time with hiprtc and
launched through hip-python's module API on bf16 inputs made by torch.

    python bench.py --M 4096 --N 4096 --K 2048
"""

import argparse
import ctypes
import math
import os

import torch
from hip import hip, hiprtc

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL_DIR = os.path.join(HERE, "kernels")
KERNELS = ["naive.cpp", "lds_tiling.cpp", "double_buffer.cpp"]
TILE = 64
THREADS = 256


def hip_check(call_result):
    err, *rest = call_result
    if isinstance(err, hip.hipError_t) and err != hip.hipError_t.hipSuccess:
        raise RuntimeError(str(err))
    return rest[0] if len(rest) == 1 else rest


def compile_kernel(source, name, arch):
    prog = hip_check(hiprtc.hiprtcCreateProgram(source.encode(), b"kernel.cpp", 0, [], []))
    opts = [f"--offload-arch={arch}".encode(), b"-O3"]
    hip_check(hiprtc.hiprtcCompileProgram(prog, len(opts), opts))
    code = bytearray(hip_check(hiprtc.hiprtcGetCodeSize(prog)))
    hip_check(hiprtc.hiprtcGetCode(prog, code))
    module = hip_check(hip.hipModuleLoadData(code))
    return hip_check(hip.hipModuleGetFunction(module, name.encode()))


def bench(path, M, N, K, arch, dtype, iters=20):
    with open(path) as f:
        source = f.read()
    kernel = compile_kernel(source, "matmul_kernel", arch)
    A = torch.randn(M, K, device="cuda").to(dtype)
    B = torch.randn(K, N, device="cuda").to(dtype)
    C = torch.zeros(M, N, device="cuda", dtype=torch.float32)
    grid = ((N + TILE - 1) // TILE, math.ceil(M / TILE), 1)
    block = (THREADS, 1, 1)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        hip_check(hip.hipModuleLaunchKernel(
            kernel, *grid, *block, sharedMemBytes=0, stream=None, kernelParams=None,
            extra=(ctypes.c_void_p(A.data_ptr()), ctypes.c_void_p(B.data_ptr()), ctypes.c_void_p(C.data_ptr()),
                   ctypes.c_int(M), ctypes.c_int(N), ctypes.c_int(K))))
    stop.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(stop) / iters
    print(f"{os.path.basename(path):24s} {2 * M * N * K / ms / 1e9:8.1f} TFLOP/s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--M", type=int, default=4096)
    parser.add_argument("--N", type=int, default=4096)
    parser.add_argument("--K", type=int, default=2048)
    parser.add_argument("--arch", default="gfx942")
    args = parser.parse_args()
    for name in KERNELS:
        bench(os.path.join(KERNEL_DIR, name), args.M, args.N, args.K, args.arch, torch.bfloat16)


if __name__ == "__main__":
    main()
