"""A wide convolutional network's training step: 3×3 convolutions of 1024 channels at 128 × 128, BN, ReLU, bf16.

Session 31's CNN whose energy should sit in calls that each last tens of milliseconds (about 30 ms per convolution,
forward, data gradient and weight gradient alike, at batch 64 on an H200 by its FLOPs at some 630 TFLOP/s; not yet
measured), as the widest, highest-resolution stages of image networks do at scale, where torchvision's ResNet-50 and
VGG-16 at 224 × 224 spread theirs over calls of well under a millisecond to a few milliseconds, shorter than the power
buffer's 20 ms readings.
"""

from __future__ import annotations

from collections.abc import Callable


def make_step(
    device: str = "cuda", batch: int = 64, width: int = 1024, size: int = 128, depth: int = 6, classes: int = 1000
) -> Callable[[], None]:
    """One training step (forward, backward, SGD with momentum) of a stem (3×3, stride 2, 3 → ``width``), ``depth``
    blocks of 3×3 convolution (``width`` → ``width``, no bias), batch norm and ReLU at ``size`` × ``size``, global
    average pooling and a linear classifier, on a static synthetic batch of ``batch`` images of 2·size × 2·size, in
    channels_last with bf16 autocast (a zero-argument callable)."""
    import torch
    from torch import nn

    stem = nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False)
    blocks: list[nn.Module] = [stem, nn.BatchNorm2d(width), nn.ReLU()]
    for _ in range(depth):
        blocks += [nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    blocks += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, classes)]
    model = nn.Sequential(*blocks).to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 2 * size, 2 * size, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (batch,), device=device)
    kind = "cuda" if str(device).startswith("cuda") else "cpu"

    def step() -> None:
        with torch.autocast(kind, dtype=torch.bfloat16, cache_enabled=False):  # graph capture needs no cache
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step
