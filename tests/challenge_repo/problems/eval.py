"""A plain runner of one problem of this folder, as the challenge format lays a problem's files
out beside it: `python eval.py test` checks every tests: entry, `python eval.py benchmark` times
every benchmarks: entry (run from a folder holding submission.py, reference.py, task.py, task.yml
and utils.py)."""

import sys
import time

import torch
import yaml
from reference import check_implementation, generate_input
from submission import custom_kernel


def copy(data):
    if isinstance(data, torch.Tensor):
        return data.clone()
    if isinstance(data, (tuple, list)):
        return type(data)(copy(x) for x in data)
    return data


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main(mode: str) -> int:
    with open("task.yml") as f:
        task = yaml.safe_load(f)
    failed = 0
    for spec in task["tests" if mode == "test" else "benchmarks"]:
        data = generate_input(**spec)
        output = custom_kernel(copy(data))
        sync()
        problem = check_implementation(data, output)
        if problem:
            failed += 1
            print(f"{spec}: fail: {problem}")
            continue
        if mode == "test":
            print(f"{spec}: pass")
            continue
        times = []
        for _ in range(20):
            sync()
            start = time.perf_counter()
            custom_kernel(data)
            sync()
            times.append(time.perf_counter() - start)
        print(f"{spec}: {sorted(times)[len(times) // 2] * 1e6:.1f} us")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "test"))
