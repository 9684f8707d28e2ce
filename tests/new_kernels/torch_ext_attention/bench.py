"""Compare minimal_attn.forward with torch's attention (build the module first, CMakeLists.txt)."""

import math

import minimal_attn
import torch

batch_size, n_head, seq_len, head_embd = 16, 12, 64, 64

q = torch.randn(batch_size, n_head, seq_len, head_embd).cuda()
k = torch.randn(batch_size, n_head, seq_len, head_embd).cuda()
v = torch.randn(batch_size, n_head, seq_len, head_embd).cuda()


def manual_attn(q, k, v):
    att = (q @ k.transpose(-2, -1) * (1.0 / math.sqrt(k.size(-1))))
    return torch.softmax(att, dim=-1) @ v


out = minimal_attn.forward(q, k, v)
print("close to torch:", torch.allclose(out, manual_attn(q, k, v), rtol=0, atol=1e-2))
