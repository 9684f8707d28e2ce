"""The package-level scaled_add over a grid of sizes and scales, with keyword arguments."""

import torch
from bench_utils import parse_args, time_loop
from toy_kernels import scaled_add

SIZES = [(rows, 256) for rows in (8, 32, 128)]
ALPHAS = [0.5, 2.0]

if __name__ == "__main__":
    args = parse_args()
    for alpha in ALPHAS:
        for rows, cols in SIZES:
            x, y = torch.randn(rows, cols), torch.randn(rows, cols, dtype=torch.float64)
            time_loop(lambda x=x, y=y, alpha=alpha: scaled_add(x, y, alpha=alpha), args.reps)
