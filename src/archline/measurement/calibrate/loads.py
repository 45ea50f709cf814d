"""Timed load kernels for sensor calibration: busy for a set wall time, stamping %globaltimer."""

from __future__ import annotations

from archline.core.kernel import Arg, KernelSpec, Launch, SassCheck, Work

__all__ = ["BUSY_ENTRY", "busy_ptx", "busy_spec"]

BUSY_ENTRY = "archline_busy"


def busy_ptx(fma_per_check: int = 16) -> str:
    """PTX of a kernel that runs FP32 FMAs until ``dur_ns`` of %globaltimer have passed.

    Thread 0 of block 0 writes the start and end %globaltimer values (ns; on current drivers
    this timer follows the host's CLOCK_REALTIME to well under a millisecond) to
    ``stamps[0..1]``; every thread writes its FMA chain's value to ``out`` under a condition
    that never holds (the chain never reaches the runtime ``never`` value), so nothing is
    eliminated. Each thread keeps four independent chains, checking the timer every
    ``fma_per_check`` FMAs.
    """
    body = []
    for i in range(fma_per_check):
        r = 2 + (i % 4)
        body.append(f"  fma.rn.f32 %f{r}, %f{r}, %f10, %f11;")
    fmas = "\n".join(body)
    return f"""//
// archline: timed busy kernel (generated)
//
.version 8.0
.target sm_90
.address_size 64

.visible .entry {BUSY_ENTRY}(
  .param .u64 p_out,
  .param .u64 p_stamps,
  .param .u64 p_dur_ns,
  .param .f32 p_mul,
  .param .f32 p_add,
  .param .f32 p_never
)
{{
  .reg .pred %p<4>;
  .reg .f32 %f<16>;
  .reg .u32 %r<8>;
  .reg .u64 %rd<12>;

  ld.param.u64 %rd1, [p_out];
  ld.param.u64 %rd2, [p_stamps];
  ld.param.u64 %rd3, [p_dur_ns];
  ld.param.f32 %f10, [p_mul];
  ld.param.f32 %f11, [p_add];
  ld.param.f32 %f12, [p_never];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;
  or.b32 %r5, %r1, %r2;
  setp.eq.u32 %p2, %r5, 0;
  cvt.rn.f32.u32 %f1, %r4;
  add.f32 %f2, %f1, 0f3F800000;
  add.f32 %f3, %f1, 0f40000000;
  add.f32 %f4, %f1, 0f40400000;
  add.f32 %f5, %f1, 0f40800000;
  mov.u64 %rd4, %globaltimer;
  @%p2 st.global.u64 [%rd2], %rd4;
LOOP:
{fmas}
  mov.u64 %rd5, %globaltimer;
  sub.u64 %rd6, %rd5, %rd4;
  setp.lt.u64 %p1, %rd6, %rd3;
  @%p1 bra LOOP;
  @%p2 st.global.u64 [%rd2+8], %rd5;
  add.f32 %f6, %f2, %f3;
  add.f32 %f6, %f6, %f4;
  add.f32 %f6, %f6, %f5;
  setp.eq.f32 %p3, %f6, %f12;
  cvt.u64.u32 %rd7, %r4;
  shl.b64 %rd7, %rd7, 2;
  add.u64 %rd8, %rd1, %rd7;
  @%p3 st.global.f32 [%rd8], %f6;
  ret;
}}
"""


def busy_spec(blocks_per_sm: int = 8, block: int = 256) -> KernelSpec:
    """The busy kernel as a KernelSpec (its duration comes from ``dur_ns``, not from ``iters``)."""
    return KernelSpec(
        name="load.busy",
        group="load",
        description="FP32 FMA chains until a set %globaltimer duration has passed",
        ptx=busy_ptx(),
        entry=BUSY_ENTRY,
        args=(
            Arg("out", "ptr", "out", per_thread_bytes=4),
            Arg("stamps", "ptr", "out", fixed_bytes=16),
            Arg("dur_ns", "u64", "scalar", value=10_000_000),
            Arg("mul", "f32", "scalar", value=0.9999999),
            Arg("add", "f32", "scalar", value=1e-7),
            Arg("never", "f32", "scalar", value=-1.0),
        ),
        work=Work(unit="fp32"),
        launch=Launch(block=block, blocks_per_sm=blocks_per_sm),
        sass=(SassCheck("FFMA", 16),),
    )
