"""VGG-16's training step for ``archline replay`` (a script:function target): channels_last, bf16, batch 64.

archline replay benchmarks/workloads/vgg16_replay.py:make --top 8 -o vgg16-replay
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_resnet import make_step


def make() -> object:
    """The step, as validate_attribution_real's ``vgg16cl`` builds it."""
    return make_step("cuda:0", batch=64, channels_last=True, arch="vgg16")
