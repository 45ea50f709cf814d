"""benchmarks/busy_sim.py prints docs/data/busy_sim_s18.txt (session 17's table before the groups were ranked by their
busy time: docs/data/busy_sim_s17.txt); on the fake steps the busy model covers the in-step
energies at 2 σ in every scenario with a smaller ρ than the links model's."""

from __future__ import annotations

import pytest

from tests.helpers.bench import ROOT, load_bench


def test_the_simulation_prints_the_docs_table_and_the_busy_model_holds(capsys: pytest.CaptureFixture[str]) -> None:
    mod = load_bench("busy_sim")
    assert mod.main(["--seeds", "12"]) == 0
    out = capsys.readouterr().out
    assert out == (ROOT / "docs/data/busy_sim_s18.txt").read_text()
    sim = mod.simulate(3)
    for scenario, row in sim.items():
        assert row["busy"]["within_2sd"] >= 0.9, scenario
        assert row["busy"]["rho_fold"] < row["links"]["rho_fold"] < row["additive"]["rho_fold"], scenario
    assert mod.main(["--seeds", "0"]) == 2
