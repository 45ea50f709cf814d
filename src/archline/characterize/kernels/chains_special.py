"""Special-function (MUFU), division, IEEE rcp/sqrt and conversion chains with their host references.

IEEE-rounded chains (``div.rn``, ``rcp.rn``, ``sqrt.rn``, conversions) are reproduced bit for bit
by numpy; approximate MUFU chains cannot be, and are checked for finiteness and a stated range.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from archline.characterize.kernels.chains import ChainDef, Ops, Seed, domain_ref, identity_ref, periodic_ref
from archline.characterize.kernels.chains_fp import FP_CLASS, Fmt, fp_operand
from archline.characterize.kernels.ptx import RegClass
from archline.characterize.kernels.verify import State

__all__ = ["SPECIAL_CHAINS"]


def _between(lo: float, hi: float, *, absolute: bool = False) -> Callable[[State, Ops], str | None]:
    def check(st: State, ops: Ops) -> str | None:
        x = np.asarray(st[0]).astype(np.float64)
        v = np.abs(x) if absolute else x
        bad = np.flatnonzero(~np.isfinite(x) | (v < lo) | (v > hi))
        if bad.size:
            return f"value {x[bad[0]]!r} of thread {int(bad[0])} outside [{lo:g}, {hi:g}] or not finite"
        return None

    return check


def _sfu(
    key: str,
    instr: str,
    mufu: str,
    lo: float,
    hi: float,
    *,
    neg: bool = False,
    absolute: bool = False,
    extra: tuple[tuple[str, float], ...] = (),
    min_ptx: tuple[int, int] = (6, 3),
) -> ChainDef:
    body: tuple[tuple[str, bool], ...] = ((f"{instr} {{x}}, {{x}};", True),)
    overhead = identity_ref()
    if neg:
        # The negation folds into the MUFU operand (SASS ``MUFU.EX2 R, -R``): no extra instruction.
        body = (("neg.f32 {x}, {x};", False), *body)
        overhead = periodic_ref(lambda st, o: [np.negative(np.asarray(st[0], dtype=np.float32))])
    title = f"{instr} x = {'-' if neg else ''}x chained"
    return ChainDef(
        key,
        title,
        "sfu",
        (("x", "f32", Seed("unit")),),
        body,
        ((mufu, 1.0), *extra),
        domain_ref(_between(lo, hi, absolute=absolute)),
        overhead_ref=overhead,
        spec_key="sfu",
        sass_per_target=1.0 + len(extra),
        min_ptx=min_ptx,
    )


def _div(key: str, instr: str, denorm: bool, exact: bool, fmt: Fmt = "f32", sass_per: float = 1.0) -> ChainDef:
    k = 2.0**-100 if denorm else 2.0
    cls = FP_CLASS[fmt]
    seed = Seed("denorm") if denorm else Seed("unit", fmt=fmt)  # type: ignore[arg-type]
    mufu = "MUFU\\.RCP64H" if fmt == "f64" else "MUFU\\.RCP$"
    if exact:
        dt = np.float64 if fmt == "f64" else np.float32
        ref = periodic_ref(lambda st, o: [dt(o["k"]) / np.asarray(st[0])])
    elif denorm:
        ref = domain_ref(_between(2.0**-149, 2.0**127, absolute=True))
    else:
        ref = domain_ref(_between(2.0**-8, 2.0**8))
    kind = "denormal" if denorm else "normal"
    return ChainDef(
        key,
        f"{instr} x = k / x on {kind} operands",
        "fp64" if fmt == "f64" else "fp32",
        (("x", cls, seed),),
        ((f"{instr} {{x}}, {{k}}, {{x}};", True),),
        ((mufu, 1.0),),
        ref,
        operands=(fp_operand("k", k, fmt),),
        flops_per_target=1.0,
        sass_per_target=sass_per,
    )


def _cvt(key: str, cls: RegClass, tcls: RegClass, seed: Seed, there: str, back: str, sass: str) -> ChainDef:
    return ChainDef(
        key,
        f"{there} then {back} (exact round trip)",
        "cvt",
        (("x", cls, seed),),
        ((f"{there} {{t}}, {{x}};", True), (f"{back} {{x}}, {{t}};", True)),
        ((sass, 1.0),),
        periodic_ref(lambda st, o: st),
        temps=(("t", tcls),),
        spec_key="cvt64" if "64" in there + back else "cvt",
    )


def _defs() -> list[ChainDef]:
    return [
        _sfu("sin.approx.f32", "sin.approx.ftz.f32", "MUFU\\.SIN", 1e-30, 1.0, extra=(("FMUL\\.RZ", 1.0),)),
        _sfu(
            "cos.approx.f32", "cos.approx.ftz.f32", "MUFU\\.COS", 0.0, 1.0, absolute=True, extra=(("FMUL\\.RZ", 1.0),)
        ),
        _sfu("ex2.approx.f32", "ex2.approx.ftz.f32", "MUFU\\.EX2", 1e-30, 1.0, neg=True),
        _sfu("rsqrt.approx.f32", "rsqrt.approx.ftz.f32", "MUFU\\.RSQ", 0.5, 1.5),
        _sfu("sqrt.approx.f32", "sqrt.approx.ftz.f32", "MUFU\\.SQRT", 0.99, 2.0),
        _sfu("rcp.approx.f32", "rcp.approx.ftz.f32", "MUFU\\.RCP$", 2.0**-8, 2.0**8, neg=True, absolute=True),
        # tanh.approx.f32: PTX ISA 7.0, sm_75 (PTX ISA, "tanh" notes).
        _sfu("tanh.approx.f32", "tanh.approx.f32", "MUFU\\.TANH", 0.0, 1.0, min_ptx=(7, 0)),
        ChainDef(
            "lg2.approx.f32",
            "lg2.approx.ftz.f32 of ex2(-x) (the ex2 is the carrier)",
            "sfu",
            (("x", "f32", Seed("unit")),),
            (
                ("neg.f32 {x}, {x};", False),
                ("ex2.approx.ftz.f32 {x}, {x};", False),
                ("lg2.approx.ftz.f32 {x}, {x};", True),
            ),
            (("MUFU\\.LG2", 1.0), ("MUFU\\.EX2", 1.0)),
            domain_ref(_between(0.0, 64.0, absolute=True)),
            overhead_ref=domain_ref(_between(1e-30, 1.0)),
            spec_key="sfu",
            template="carrier",
            sass_per_target=2.0,
        ),
        ChainDef(
            "ex2lg2.approx.f32",
            "ex2.approx(-x) then lg2.approx: both MUFU, both counted",
            "sfu",
            (("x", "f32", Seed("unit")),),
            (
                ("neg.f32 {x}, {x};", False),
                ("ex2.approx.ftz.f32 {x}, {x};", True),
                ("lg2.approx.ftz.f32 {x}, {x};", True),
            ),
            (("MUFU\\.(LG2|EX2)", 1.0),),
            domain_ref(_between(0.0, 64.0, absolute=True)),
            spec_key="sfu",
        ),
        _div("div.rn.f32", "div.rn.f32", False, True, sass_per=22.0),
        _div("div.rn.f32.denormal", "div.rn.f32", True, True, sass_per=22.0),
        _div("div.full.f32", "div.full.f32", False, False, sass_per=6.0),
        _div("div.full.f32.denormal", "div.full.f32", True, False, sass_per=6.0),
        _div("div.approx.f32", "div.approx.f32", False, False, sass_per=4.0),
        _div("div.approx.f32.denormal", "div.approx.f32", True, False, sass_per=4.0),
        _div("div.rn.f64", "div.rn.f64", False, True, fmt="f64", sass_per=28.0),
        ChainDef(
            "rcp.rn.f32",
            "rcp.rn.f32 x = 1/x (IEEE, subroutine)",
            "fp32",
            (("x", "f32", Seed("unit")),),
            (("rcp.rn.f32 {x}, {x};", True),),
            (("MUFU\\.RCP$", 1.0),),
            periodic_ref(lambda st, o: [np.float32(1.0) / np.asarray(st[0])]),
            flops_per_target=1.0,
            sass_per_target=18.0,
        ),
        ChainDef(
            "sqrt.rn.f32",
            "sqrt.rn.f32 x = sqrt(x) (IEEE, subroutine; settles at 1)",
            "fp32",
            (("x", "f32", Seed("unit")),),
            (("sqrt.rn.f32 {x}, {x};", True),),
            (("MUFU\\.RSQ", 1.0),),
            periodic_ref(lambda st, o: [np.sqrt(np.asarray(st[0]))]),
            flops_per_target=1.0,
            sass_per_target=16.0,
        ),
        _cvt("cvt.f32.f64", "f32", "f64", Seed("unit"), "cvt.f64.f32", "cvt.rn.f32.f64", "F2F"),
        _cvt("cvt.f32.s32", "f32", "b32", Seed("intf", bits=20), "cvt.rzi.s32.f32", "cvt.rn.f32.s32", "(F2I|I2F)"),
        _cvt("cvt.f32.f16", "f32", "b16", Seed("unit", bits=10), "cvt.rn.f16.f32", "cvt.f32.f16", "(F2FP|HADD2\\.F32)"),
        _cvt("cvt.f64.u64", "f64", "b64", Seed("intf", bits=30), "cvt.rzi.u64.f64", "cvt.rn.f64.u64", "(F2I|I2F)"),
        _cvt("cvt.f64.s32", "f64", "b32", Seed("intf", bits=20), "cvt.rzi.s32.f64", "cvt.rn.f64.s32", "(F2I|I2F)"),
        _cvt("cvt.f32.u64", "f32", "b64", Seed("intf", bits=20), "cvt.rzi.u64.f32", "cvt.rn.f32.u64", "(F2I|I2F)"),
    ]


SPECIAL_CHAINS: dict[str, ChainDef] = {c.key: c for c in _defs()}
