"""GPT-2 greedy decoding with a KV cache: 124 M parameters, random weights from its config, fp16, batch 1."""

from __future__ import annotations

from collections.abc import Callable


def make_step(device: str = "cuda", tokens: int = 64, prompt_len: int = 32) -> Callable[[], None]:
    """One step: the prompt's forward pass, then ``tokens`` tokens decoded one by one (no synchronisation)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).to(device, torch.float16).eval()
    prompt = torch.randint(0, 50257, (1, prompt_len), device=device)

    @torch.inference_mode()
    def step() -> None:
        out = model(prompt, use_cache=True)
        past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
        for _ in range(tokens):
            out = model(tok, past_key_values=past, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)

    return step
