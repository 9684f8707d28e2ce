"""A child program for the ncu integration test: launches the copy kernels once outside and once
inside the "flopwatch:timed" NVTX range, and a torch.matmul inside it. ncu filtering by that range
must profile exactly the launches inside. Usage: ncu_child.py COALESCED.so STRIDED.so"""

import ctypes
import sys

import torch

n = 1 << 24
src = torch.randn(n, device="cuda")
dst = torch.empty(n, device="cuda")
a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
libs = [(ctypes.CDLL(path), name) for path, name in zip(sys.argv[1:3], ["copy_coalesced", "copy_strided"])]
stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
args = (ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()), ctypes.c_longlong(n), stream)
for lib, name in libs:  # warm-up: outside the range, must not be profiled
    getattr(lib, name)(*args)
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("flopwatch:timed")
for lib, name in libs:
    getattr(lib, name)(*args)
a @ a
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("ncu child done")
