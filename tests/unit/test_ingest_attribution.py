"""scripts/ingest_attribution.sh: an attribution step's archives, as the device tool returns them, land as a shipped
run set (HTML left out), its log and its raw trace (.bin.xz in its run directory); a folder without the archives,
or a run set that exists, is one line and exit 2."""

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
    _tar(
        where / "all-logs-h100-attribution.tar.gz",
        {"logs/nvidia-smi.csv": SMI.encode(), "logs/attribution.log": b"ok\n"},
    )
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


@pytest.mark.skipif(shutil.which("xz") is None or shutil.which("bash") is None, reason="needs bash and xz")
def test_the_second_gpus_archive_is_named_by_its_manifests_board(tmp_path: Path) -> None:
    """On a two-GPU host nvidia-smi.csv lists both boards: the run set takes the board its run's manifest names,
    and each archive takes only its own run's trace."""
    _device_files(tmp_path / "dev")
    smi2 = SMI + "1, NVIDIA H100 80GB HBM3, GPU-54411693-2701-6d75-891f-c5b37c807428, 580.159.04, 700.00 W\n"
    _tar(tmp_path / "dev" / "all2-results-h100-attribution.tar.gz", {
        "./h100/run/summary.json": b"{}",
        "./h100/run/resnet50cl-run/manifest.json": b'{"gpu": {"uuid": "GPU-54411693-2701-6d75-891f-c5b37c807428"}}',
    })  # fmt: skip
    _tar(tmp_path / "dev" / "all2-logs-h100-attribution.tar.gz",
         {"logs/nvidia-smi.csv": smi2.encode(), "logs/attribution.log": b"two\n"})  # fmt: skip
    (tmp_path / "dev" / "large-h100_run_resnet50cl-run_raw_cupti_cupti-9-1.bin.gz").write_bytes(gzip.compress(b"R"))
    env = {"ARCHLINE_RESULTS": str(tmp_path / "results"), "PATH": "/usr/bin:/bin"}
    second = subprocess.run([str(SCRIPT), str(tmp_path / "dev"), "attribution-s99", "cl", "all2"], env=env,
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert second.returncode == 0, second.stderr
    dest = tmp_path / "results" / "h100" / "attribution-s99" / "cl-GPU-54411693"
    assert lzma.decompress((dest / "resnet50cl-run" / "raw" / "cupti" / "cupti-9-1.bin.xz").read_bytes()) == b"R"
    assert not (dest / "transformer-run").exists() and "left for another archive" in second.stdout
    first = subprocess.run([str(SCRIPT), str(tmp_path / "dev"), "attribution-s99", "tf", "all"], env=env,
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert first.returncode == 0, first.stderr
    tf = tmp_path / "results" / "h100" / "attribution-s99" / "tf-GPU-c4fd4b97"
    assert (tf / "transformer-run" / "raw" / "cupti" / "cupti-2307-17957.bin.xz").exists()
    assert not (tf / "resnet50cl-run").exists()
