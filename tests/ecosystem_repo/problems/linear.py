import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer: its weights come from the seed the harness sets before building it."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


batch_size = 32
in_features = 64
out_features = in_features * 2


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
