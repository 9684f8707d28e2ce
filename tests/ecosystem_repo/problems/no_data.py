import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


rows = 16


def get_inputs():
    raise FileNotFoundError("data/tokens.bin is not in this checkout")
