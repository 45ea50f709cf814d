"""A real training program: torchvision ResNet-50, bf16 autocast, synthetic data, SGD, for a set time.

    python3 benchmarks/workloads/train_resnet.py [--seconds 18] [--batch 128]

Prints the number of steps and the program's own time per step (after 3 warm-up steps).
"""

from __future__ import annotations

import argparse
import json
import time


def make_step(device: str = "cuda", batch: int = 128, channels_last: bool = False, arch: str = "resnet50") -> object:
    """One training step of a torchvision CNN (ResNet-50 unless ``arch`` names another, e.g. ``vgg16``) on a static
    synthetic batch (a zero-argument callable).

    ``channels_last`` puts the model and the batch in NHWC, as users training CNNs with mixed
    precision usually do (cuDNN then runs its NHWC tensor-core kernels without layout conversions).
    """
    import torch
    import torchvision

    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = torchvision.models.get_model(arch).to(device, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=device).to(memory_format=fmt)
    y = torch.randint(0, 1000, (batch,), device=device)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # graph capture needs no cache
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=18.0)
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
    step = make_step("cuda", a.batch)
    for _ in range(3):
        step()  # type: ignore[operator]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < a.seconds:
        step()  # type: ignore[operator]
        n += 1
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(json.dumps({"steps": n, "step_s": dt / max(n, 1)}))


if __name__ == "__main__":
    main()
