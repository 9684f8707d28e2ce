import torch
import myext_cpp

a = torch.randn(256, 1024)
b = torch.randn(256, 1024)
print(myext_cpp.swiglu(a, b).sum())
