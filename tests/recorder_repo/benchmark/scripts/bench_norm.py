"""The norm at the token counts the model's memory probe allows, in three modes, with its own
timing loop."""

import torch
from bench_utils import TOY_VERSION, misbehave, parse_args, save, time_loop
from model_configs import MODELS, norm_sweep
from toy_kernels.modules import ToyNorm


def setup(tokens, hidden):
    x = torch.randn(tokens, hidden, requires_grad=True)
    return x, ToyNorm(hidden)


def measure(mode, x, layer, reps):
    if mode == "forward":
        return time_loop(lambda: layer(x), reps)
    if mode == "backward":
        y = layer(x)
        dy = torch.randn_like(y)
        return time_loop(lambda: y.backward(dy, retain_graph=True), reps)

    def full():
        y = layer(x)
        y.backward(torch.randn_like(y))
    return time_loop(full, reps)


if __name__ == "__main__":
    args = parse_args()
    hidden = MODELS[args.model]["hidden_size"]
    sizes = norm_sweep(args.model)
    rows, done = [], 0
    for mode in ("forward", "backward", "full"):
        for tokens in sizes:
            x, layer = setup(tokens, hidden)
            ms = measure(mode, x, layer, args.reps)
            rows.append({"mode": mode, "tokens": tokens, "ms": ms, "version": TOY_VERSION})
            done += 1
            misbehave(args, done)
    save(rows)
    print(f"toy-kernels {TOY_VERSION}: {len(rows)} rows")
