"""A transformer training step: torch.nn.TransformerEncoder (4 layers, d=512), bf16 autocast, static data."""

from __future__ import annotations

from collections.abc import Callable


def make_step(device: str = "cuda", batch: int = 16, seq: int = 512) -> Callable[[], None]:
    """One training step (forward, backward, SGD) on a static synthetic batch."""
    import torch

    layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, seq, 512, device=device)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # graph capture needs no cache
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    return step
