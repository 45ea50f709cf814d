"""A 2-rank (or N-rank) DDP training job for ``torchrun``: bf16, synthetic data, gradients all-reduced by NCCL.

    torchrun --nproc_per_node 2 benchmarks/workloads/ddp_train.py --seconds 20 [--model mlp|transformer]

``mlp``: four bf16 GEMM layers; ``transformer``: a small encoder (6 layers, d_model 1024, sequence 512:
GEMMs, attention, layer norms, elementwise kernels). Each rank trains on its own GPU (LOCAL_RANK) for
about ``--seconds`` and prints its step count.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")


def main() -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--model", choices=("mlp", "transformer"), default="mlp")
    a = ap.parse_args()
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    dev = torch.device("cuda", rank)
    if a.model == "transformer":
        layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True)
        model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 6), torch.nn.Linear(1024, 16))
        x = torch.randn(16, 512, 1024, device=dev, dtype=torch.bfloat16)
        y = torch.randint(0, 16, (16 * 512,), device=dev)
    else:
        layers = [m for _ in range(4) for m in (torch.nn.Linear(a.width, a.width), torch.nn.GELU())]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(a.width, 16))
        x = torch.randn(a.batch, a.width, device=dev, dtype=torch.bfloat16)
        y = torch.randint(0, 16, (a.batch,), device=dev)
    model = model.to(dev, torch.bfloat16)
    ddp = DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
    steps = 0
    # Every rank stops at the same step: rank 0 decides from its clock and broadcasts.
    stop = torch.zeros(1, device=dev)
    t0 = time.time()
    while True:
        loss = torch.nn.functional.cross_entropy(ddp(x).float().reshape(-1, 16), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
        if steps % 10 == 0:
            stop.fill_(1.0 if rank == 0 and time.time() - t0 >= a.seconds else 0.0)
            dist.broadcast(stop, 0)
            if stop.item() > 0:
                break
    torch.cuda.synchronize()
    print(f"rank {rank}: {steps} steps in {time.time() - t0:.1f} s, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
