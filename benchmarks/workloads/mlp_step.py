"""An MLP training step: four bf16 Linear layers with GELU, MSE loss, SGD, on a static batch."""

from __future__ import annotations

from collections.abc import Callable


def make_step(device: str = "cuda", batch: int = 4096, width: int = 4096) -> Callable[[], None]:
    """One training step (forward, backward, SGD) of a 4-layer MLP."""
    import torch

    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(device=device, dtype=torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=device, dtype=torch.bfloat16)
    y = torch.randn(batch, width, device=device, dtype=torch.bfloat16)

    def step() -> None:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    return step
