"""A transformer training step: torch.nn.TransformerEncoder (4 layers, d=512 or wider), bf16 autocast, static data."""

from __future__ import annotations

from collections.abc import Callable


def make_step(
    device: str = "cuda", batch: int = 16, seq: int = 512, d_model: int = 512, nhead: int = 8, layers: int = 4
) -> Callable[[], None]:
    """One training step (forward, backward, SGD) on a static synthetic batch of ``layers`` encoder layers; the
    feed-forward layer is 4 × d_model wide, as in GPT-style blocks."""
    import torch

    layer = torch.nn.TransformerEncoderLayer(
        d_model=d_model, nhead=nhead, dim_feedforward=4 * d_model, batch_first=True
    )
    model = torch.nn.TransformerEncoder(layer, num_layers=layers).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, seq, d_model, device=device)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # graph capture needs no cache
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    return step
