import pytest
import torch

from toy_sizes.functional import scaled_norm, scaled_norm_ref, scaled_silu, scaled_silu_ref


@pytest.mark.parametrize("B, T, H", [(2, 4, 8), (1, 3, 16)])
def test_scaled_silu(B, T, H):
    x = torch.randn(B, T, H)
    torch.testing.assert_close(scaled_silu(x), scaled_silu_ref(x), rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("B, T, H", [(2, 4, 8)])
def test_scaled_norm(B, T, H):
    x = torch.randn(B, T, H)
    w = torch.randn(H)
    torch.testing.assert_close(scaled_norm(x, w), scaled_norm_ref(x, w))
