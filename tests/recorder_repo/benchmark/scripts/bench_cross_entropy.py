"""Cross entropy at each model's vocabulary (a model-config sweep), against torch, timed with
triton.testing.do_bench."""

import torch
import triton
from bench_utils import TOY_VERSION, parse_args, save
from model_configs import cross_entropy_sweep
from toy_kernels.modules import ToyCrossEntropyLoss

QUANTILES = [0.5, 0.2, 0.8]


def setup(provider, bt, vocab):
    logits = torch.randn(bt, vocab, requires_grad=True)
    target = torch.randint(vocab, (bt,))
    loss = ToyCrossEntropyLoss() if provider == "toy" else torch.nn.CrossEntropyLoss()
    return logits, lambda: loss(logits, target)


if __name__ == "__main__":
    args = parse_args()
    rows = []
    for mode in ("forward", "full"):
        for provider in ("toy", "torch"):
            for model, bt, vocab in cross_entropy_sweep(args.tokens):
                logits, fwd = setup(provider, bt, vocab)
                if mode == "forward":
                    fn = fwd
                else:
                    def fn(fwd=fwd):
                        fwd().backward()
                ms_50, ms_20, ms_80 = triton.testing.do_bench(fn, grad_to_none=[logits], rep=args.reps,
                                                              quantiles=QUANTILES)
                rows.append({"mode": mode, "provider": provider, "model": model, "ms": ms_50, "version": TOY_VERSION})
    save(rows)
