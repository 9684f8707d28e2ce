import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The same parameters, created in the same order: one matmul and the bias, fused by hand."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.addmm(self.fc.bias, x, self.fc.weight.t())
