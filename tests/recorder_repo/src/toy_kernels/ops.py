"""The kernels, as autograd Functions (and one plain function). Each Function's forward takes at
least KERNEL_S, the time a GPU kernel takes at a real size: a script that really ran its timing
loops over them would take minutes."""

import time

import torch

KERNEL_S = 0.02


class NormFunction(torch.autograd.Function):
    """RMS norm: X * rsqrt(mean(X^2) + eps) * W."""

    @staticmethod
    def forward(ctx, X, W, eps):
        time.sleep(KERNEL_S)
        rstd = torch.rsqrt(X.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(X, W, rstd)
        return X * rstd * W

    @staticmethod
    def backward(ctx, dY):
        X, W, rstd = ctx.saved_tensors
        xhat = X * rstd
        dxhat = dY * W
        dX = rstd * (dxhat - xhat * (dxhat * xhat).mean(-1, keepdim=True))
        dW = (dY * xhat).reshape(-1, X.shape[-1]).sum(0)
        return dX, dW, None


class CrossEntropyFunction(torch.autograd.Function):
    """Cross entropy of logits [BT, V] against targets [BT]."""

    @staticmethod
    def forward(ctx, logits, target, ignore_index, reduction):
        time.sleep(KERNEL_S)
        logp = torch.log_softmax(logits, dim=-1)
        keep = target != ignore_index
        picked = -logp.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1) * keep
        ctx.save_for_backward(logp, target, keep)
        ctx.reduction, ctx.count = reduction, max(int(keep.sum()), 1)
        return picked.sum() / ctx.count if reduction == "mean" else picked

    @staticmethod
    def backward(ctx, dloss):
        logp, target, keep = ctx.saved_tensors
        grad = logp.exp()
        grad.scatter_add_(1, target.clamp(min=0).unsqueeze(1), -torch.ones_like(grad[:, :1]))
        grad = grad * keep.unsqueeze(1)
        grad = grad * (dloss / ctx.count if ctx.reduction == "mean" else dloss.unsqueeze(1))
        return grad, None, None, None


def scaled_add(x, y, alpha=1.0):
    """x + alpha * y."""
    return x + alpha * y
