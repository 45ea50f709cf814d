"""scripts/ingest_attribution.sh: an attribution step's archives, as the device tool returns them, land as a shipped
run set (HTML left out), its log and its raw trace (.bin.xz in its run directory); on a host of two GPUs each
archive takes its own board and its own traces; a folder without the archives, a run set that exists, several
archives with none named, or manifests naming several boards, is one line and exit 2."""

from __future__ import annotations

import gzip
import io
import lzma
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ingest_attribution.sh"
SMI = (
    "index, name, uuid, driver_version, power.limit [W]\n"
    "0, NVIDIA H100 80GB HBM3, GPU-c4fd4b97-cedf-db27-c9b8-4cc125b05fbc, 580.159.04, 700.00 W\n"
)


def _tar(path: Path, files: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _device_files(where: Path) -> None:
    where.mkdir()
    _tar(where / "all-results-h100-attribution.tar.gz", {  # as device_bg.sh names a step's archive under out/all
        "./h100/run/summary.json": b"{}",
        "./h100/run/transformer-run/attribution.json": b"{}",
        "./h100/run/transformer-replay/report.html": b"<html>",
        "./h100/run/transformer-replay/report.md": b"# replay",
    })  # fmt: skip
    big = "large-h100+run+transformer-run+raw+cupti+cupti-2307-17957.bin.gz"
    _tar(where / "all-logs-h100-attribution.tar.gz", {
        "logs/nvidia-smi.csv": SMI.encode(), "logs/attribution.log": b"ok\n",
        "logs/large-files.txt": f"h100/run/transformer-run/raw/cupti/cupti-2307-17957.bin -> {big}\n".encode(),
    })  # fmt: skip
    (where / "large-h100_run_transformer-run_raw_cupti_cupti-2307-17957.bin.gz").write_bytes(gzip.compress(b"TRACE"))


@pytest.mark.skipif(shutil.which("xz") is None or shutil.which("bash") is None, reason="needs bash and xz")
def test_the_archives_land_as_a_shipped_run_set(tmp_path: Path) -> None:
    _device_files(tmp_path / "dev")
    env = {"ARCHLINE_RESULTS": str(tmp_path / "results"), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([str(SCRIPT), str(tmp_path / "dev"), "attribution-s99", "check"], env=env,
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    dest = tmp_path / "results" / "h100" / "attribution-s99" / "check-GPU-c4fd4b97"
    assert (dest / "summary.json").read_text() == "{}" and (dest / "transformer-replay" / "report.md").exists()
    assert not list(dest.rglob("*.html")) and "GPU-c4fd4b97" in (dest / "nvidia-smi.csv").read_text()
    trace = dest / "transformer-run" / "raw" / "cupti" / "cupti-2307-17957.bin.xz"
    assert lzma.decompress(trace.read_bytes()) == b"TRACE"
    log = tmp_path / "results" / "h100" / "bench" / "attribution-real" / "attribution-s99-check-GPU-c4fd4b97.log"
    assert log.read_text() == "ok\n"
    again = subprocess.run([str(SCRIPT), str(tmp_path / "dev"), "attribution-s99", "check"], env=env,
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert again.returncode == 2 and again.stderr.strip().endswith("exists") and len(again.stderr.splitlines()) == 1
    (tmp_path / "empty").mkdir()
    none = subprocess.run([str(SCRIPT), str(tmp_path / "empty"), "attribution-s99", "x"], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert none.returncode == 2 and len(none.stderr.splitlines()) == 1 and "no results-" in none.stderr


def _second_gpu(where: Path, run: str, trace: str, manifests: dict[str, bytes]) -> None:
    """GPU 1's archives beside GPU 0's (device_bg.sh's all2-*): its run, its trace, nvidia-smi.csv listing both. Its
    trace comes back xz-packed, as device.sh packs them since session 26 (GPU 0's gzipped, as before)."""
    smi2 = SMI + "1, NVIDIA H100 80GB HBM3, GPU-54411693-2701-6d75-891f-c5b37c807428, 580.159.04, 700.00 W\n"
    big = f"large-h100+run+{run}+raw+cupti+{trace}.bin.xz"
    _tar(where / "all2-results-h100-attribution.tar.gz", {"./h100/run/summary.json": b"{}", **manifests})
    _tar(where / "all2-logs-h100-attribution.tar.gz", {
        "logs/nvidia-smi.csv": smi2.encode(), "logs/attribution.log": b"two\n",
        "logs/large-files.txt": f"h100/run/{run}/raw/cupti/{trace}.bin -> {big}\n".encode(),
    })  # fmt: skip
    (where / big.replace("+", "_")).write_bytes(lzma.compress(b"SECOND"))


def _ingest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"ARCHLINE_RESULTS": str(tmp_path / "results"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([str(SCRIPT), str(tmp_path / "dev"), "attribution-s99", *args], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip


NEEDS = pytest.mark.skipif(shutil.which("xz") is None or shutil.which("bash") is None, reason="needs bash and xz")
UUID1 = b'{"gpu": {"uuid": "GPU-54411693-2701-6d75-891f-c5b37c807428"}}'


@NEEDS
def test_each_gpus_archive_takes_its_manifests_board_and_its_own_trace(tmp_path: Path) -> None:
    """The same workload on two GPUs: each run set is named by the board its manifests name (nvidia-smi.csv lists
    both), and takes the trace its own logs list, though both runs are called transformer-run."""
    _device_files(tmp_path / "dev")
    _second_gpu(
        tmp_path / "dev",
        "transformer-run",
        "cupti-9-1",
        {"./h100/run/transformer-run/manifest.json": UUID1, "./h100/run/transformer-replay/manifest.json": UUID1},
    )
    none = _ingest(tmp_path, "x")
    assert none.returncode == 2 and "name one" in none.stderr and len(none.stderr.splitlines()) == 1
    second = _ingest(tmp_path, "tf", "all2")
    assert second.returncode == 0, second.stderr
    dest = tmp_path / "results" / "h100" / "attribution-s99" / "tf-GPU-54411693"
    assert [p.name for p in dest.rglob("*.bin.xz")] == ["cupti-9-1.bin.xz"]
    assert lzma.decompress((dest / "transformer-run" / "raw" / "cupti" / "cupti-9-1.bin.xz").read_bytes()) == b"SECOND"
    first = _ingest(tmp_path, "tf", "all")
    assert first.returncode == 0, first.stderr
    tf = tmp_path / "results" / "h100" / "attribution-s99" / "tf-GPU-c4fd4b97"
    assert [p.name for p in tf.rglob("*.bin.xz")] == ["cupti-2307-17957.bin.xz"]


@NEEDS
def test_manifests_naming_two_boards_are_refused(tmp_path: Path) -> None:
    _device_files(tmp_path / "dev")
    other = b'{"gpu": {"uuid": "GPU-ecd6d00a-0ae2-7bf5-3088-b844584a985e"}}'
    _second_gpu(
        tmp_path / "dev",
        "resnet50cl-run",
        "cupti-9-1",
        {"./h100/run/resnet50cl-run/manifest.json": UUID1, "./h100/run/resnet50cl-replay/manifest.json": other},
    )
    bad = _ingest(tmp_path, "cl", "all2")
    assert bad.returncode == 2 and "several boards" in bad.stderr and len(bad.stderr.splitlines()) == 1
    assert not (tmp_path / "results" / "h100" / "attribution-s99").exists()


@NEEDS
def test_without_a_manifests_board_a_two_gpu_nvidia_smi_is_not_guessed_from(tmp_path: Path) -> None:
    _device_files(tmp_path / "dev")
    _second_gpu(tmp_path / "dev", "resnet50cl-run", "cupti-9-1", {"./h100/run/resnet50cl-run/x.json": b"{}"})
    bad = _ingest(tmp_path, "cl", "all2")
    assert bad.returncode == 2 and "name no board" in bad.stderr


@NEEDS
def test_the_unprefixed_archives_are_named_by_a_dot(tmp_path: Path) -> None:
    """A plan whose first step wrote its archives in $OUT itself (results-*, no prefix) and its second under all/:
    '.' names the first."""
    _device_files(tmp_path / "dev")
    for f in (tmp_path / "dev").glob("all-*.tar.gz"):
        f.rename(f.with_name(f.name.removeprefix("all-")))
    _second_gpu(tmp_path / "dev", "resnet50cl-run", "cupti-9-1", {"./h100/run/resnet50cl-run/manifest.json": UUID1})
    (tmp_path / "dev" / "all2-results-h100-attribution.tar.gz").rename(
        tmp_path / "dev" / "all-results-h100-attribution.tar.gz"
    )
    (tmp_path / "dev" / "all2-logs-h100-attribution.tar.gz").rename(
        tmp_path / "dev" / "all-logs-h100-attribution.tar.gz"
    )
    first = _ingest(tmp_path, "tf", ".")
    assert first.returncode == 0, first.stderr
    tf = tmp_path / "results" / "h100" / "attribution-s99" / "tf-GPU-c4fd4b97"
    assert [p.name for p in tf.rglob("*.bin.xz")] == ["cupti-2307-17957.bin.xz"]
    second = _ingest(tmp_path, "cl", "all")
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "results" / "h100" / "attribution-s99" / "cl-GPU-54411693" / "resnet50cl-run").is_dir()
