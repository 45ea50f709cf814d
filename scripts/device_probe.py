"""Probe a lent GPU machine: software versions, API shapes and raw sensor behaviour.

Run once per new image. Writes everything under $OUT (or ./probe_out).
Does not change any card setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import traceback

import numpy as np

OUT = os.environ.get("OUT", "probe_out")
os.makedirs(OUT, exist_ok=True)
info: dict = {}


def step(name):
    def deco(fn):
        t0 = time.time()
        try:
            info[name] = fn()
        except Exception as exc:  # probe: record and go on
            info[name] = {"error": repr(exc), "tb": traceback.format_exc()}
        print(f"[{time.time() - t0:6.1f}s] {name}: {str(info[name])[:300]}", flush=True)
        return fn

    return deco


@step("versions")
def _versions():
    out = {"python": sys.version}
    for mod in ["cuda.core", "cuda.bindings", "pynvml", "cupy", "torch", "numpy", "scipy", "cupti", "typer", "rich"]:
        try:
            m = __import__(mod, fromlist=["x"])
            out[mod] = getattr(m, "__version__", "?")
        except Exception as exc:
            out[mod] = f"missing: {exc!r}"
    for tool in ["ptxas", "nvdisasm", "nvcc", "ncu", "cuobjdump"]:
        r = subprocess.run(
            ["bash", "-lc", f"command -v {tool} && {tool} --version | tail -1"], capture_output=True, text=True
        )
        out[tool] = r.stdout.strip()
    r = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True)
    with open(f"{OUT}/nvidia-smi-q.txt", "w") as f:
        f.write(r.stdout)
    return out


import pynvml as nv  # noqa: E402

nv.nvmlInit()
H = nv.nvmlDeviceGetHandleByIndex(0)


@step("nvml_static")
def _static():
    d = {
        "name": nv.nvmlDeviceGetName(H),
        "driver": nv.nvmlSystemGetDriverVersion(),
        "cuda_driver": nv.nvmlSystemGetCudaDriverVersion(),
        "power_limit_mw": nv.nvmlDeviceGetPowerManagementLimit(H),
        "enforced_limit_mw": nv.nvmlDeviceGetEnforcedPowerLimit(H),
        "persistence": nv.nvmlDeviceGetPersistenceMode(H),
        "sm_clock_mhz": nv.nvmlDeviceGetClockInfo(H, nv.NVML_CLOCK_SM),
        "mem_clock_mhz": nv.nvmlDeviceGetClockInfo(H, nv.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(H, nv.NVML_CLOCK_SM),
        "temp_c": nv.nvmlDeviceGetTemperature(H, nv.NVML_TEMPERATURE_GPU),
        "throttle": nv.nvmlDeviceGetCurrentClocksEventReasons(H),
        "serial": nv.nvmlDeviceGetSerial(H) if hasattr(nv, "nvmlDeviceGetSerial") else None,
        "uuid": nv.nvmlDeviceGetUUID(H),
    }
    try:
        d["app_clock_sm"] = nv.nvmlDeviceGetApplicationsClock(H, nv.NVML_CLOCK_SM)
    except Exception as exc:
        d["app_clock_sm"] = repr(exc)
    return d


@step("nvml_call_costs")
def _costs():
    res = {}
    calls = {
        "getSamples": lambda: nv.nvmlDeviceGetSamples(H, nv.NVML_TOTAL_POWER_SAMPLES, 0),
        "fields_instant_avg": lambda: nv.nvmlDeviceGetFieldValues(H, [186, 185]),
        "powerUsage": lambda: nv.nvmlDeviceGetPowerUsage(H),
        "energy": lambda: nv.nvmlDeviceGetTotalEnergyConsumption(H),
        "clock_sm": lambda: nv.nvmlDeviceGetClockInfo(H, nv.NVML_CLOCK_SM),
        "throttle": lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(H),
        "temp": lambda: nv.nvmlDeviceGetTemperature(H, nv.NVML_TEMPERATURE_GPU),
        "memory": lambda: nv.nvmlDeviceGetMemoryInfo(H),
    }
    for k, fn in calls.items():
        ts = []
        for _ in range(30):
            t0 = time.perf_counter_ns()
            fn()
            ts.append(time.perf_counter_ns() - t0)
        res[k] = {"median_us": float(np.median(ts) / 1e3), "max_us": float(np.max(ts) / 1e3)}
    typ, samples = nv.nvmlDeviceGetSamples(H, nv.NVML_TOTAL_POWER_SAMPLES, 0)
    res["samples_type"] = int(typ)
    res["n_samples"] = len(samples)
    ts = [s.timeStamp for s in samples]
    res["sample_dt_us"] = [int(b - a) for a, b in zip(ts[:20], ts[1:21])]
    res["sample_first"] = {"ts": int(samples[0].timeStamp), "val": str(samples[0].sampleValue.uiVal)}
    res["host_time_us_now"] = time.time_ns() // 1000
    fv = nv.nvmlDeviceGetFieldValues(H, [186, 185])
    res["fields"] = [
        {
            "fieldId": f.fieldId,
            "ts": int(f.timestamp),
            "latency": int(f.latencyUsec),
            "valueType": int(f.valueType),
            "ret": int(f.nvmlReturn),
            "uiVal": int(f.value.uiVal),
            "ullVal": int(f.value.ullVal),
        }
        for f in fv
    ]
    return res


# ---------------- cuda.core kernel -----------------
try:
    from cuda.core import Device, LaunchConfig, Linker, LinkerOptions, ObjectCode, launch  # type: ignore

    CORE_NS = "cuda.core"
except Exception:
    from cuda.core.experimental import Device, LaunchConfig, Linker, LinkerOptions, ObjectCode, launch  # type: ignore

    CORE_NS = "cuda.core.experimental"

PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry busy(.param .u64 out, .param .u64 dur_ns, .param .u64 stamps)
{
  .reg .pred p<4>;
  .reg .f32 f<20>;
  .reg .u64 t<8>;
  .reg .u32 r<8>;
  ld.param.u64 t1, [out];
  ld.param.u64 t2, [dur_ns];
  ld.param.u64 t6, [stamps];
  mov.u32 r1, %tid.x;
  mov.u32 r2, %ctaid.x;
  or.b32 r3, r1, r2;
  setp.eq.u32 p2, r3, 0;
  cvt.rn.f32.u32 f1, r1;
  add.f32 f2, f1, 1.0;
  add.f32 f3, f1, 2.0;
  add.f32 f4, f1, 3.0;
  add.f32 f5, f1, 4.0;
  mov.u64 t3, %globaltimer;
  @p2 st.global.u64 [t6], t3;
LOOP:
  fma.rn.f32 f2, f2, 0f3F7FFFFF, 0f3A000000;
  fma.rn.f32 f3, f3, 0f3F7FFFFF, 0f3A000000;
  fma.rn.f32 f4, f4, 0f3F7FFFFF, 0f3A000000;
  fma.rn.f32 f5, f5, 0f3F7FFFFF, 0f3A000000;
  fma.rn.f32 f2, f2, 0f3F7FFFFF, 0f3A000000;
  fma.rn.f32 f3, f3, 0f3F7FFFFF, 0f3A000000;
  fma.rn.f32 f4, f4, 0f3F7FFFFF, 0f3A000000;
  fma.rn.f32 f5, f5, 0f3F7FFFFF, 0f3A000000;
  mov.u64 t4, %globaltimer;
  sub.u64 t5, t4, t3;
  setp.lt.u64 p1, t5, t2;
  @p1 bra LOOP;
  @p2 st.global.u64 [t6+8], t4;
  add.f32 f6, f2, f3;
  add.f32 f6, f6, f4;
  add.f32 f6, f6, f5;
  setp.eq.f32 p3, f6, 0f7F800001;
  @p3 st.global.f32 [t1], f6;
  ret;
}
"""

dev = Device(0)
dev.set_current()
stream = dev.create_stream()


@step("cuda_core")
def _core():
    d = {"ns": CORE_NS, "cc": dev.compute_capability, "name": dev.name}
    props = dev.properties
    d["sm_count"] = props.multiprocessor_count
    d["l2"] = props.l2_cache_size
    opts = LinkerOptions(arch="sm_90", optimization_level=3)
    linker = Linker(ObjectCode.from_ptx(PTX.encode()), options=opts)
    cubin = linker.link("cubin")
    d["cubin_type"] = type(cubin).__name__
    return d


cubin = Linker(ObjectCode.from_ptx(PTX.encode()), options=LinkerOptions(arch="sm_90", optimization_level=3)).link(
    "cubin"
)
kern = cubin.get_kernel("busy")
import cupy as cp  # noqa: E402

outbuf = cp.zeros(4, dtype=cp.float32)
stamps = cp.zeros(2, dtype=cp.uint64)
SMS = dev.properties.multiprocessor_count
CFG = LaunchConfig(grid=SMS * 8, block=256)


def busy(dur_s: float, sync=True):
    launch(stream, CFG, kern, outbuf.data.ptr, np.uint64(int(dur_s * 1e9)), stamps.data.ptr)
    if sync:
        stream.sync()


@step("events_timing")
def _ev():
    busy(0.01)
    try:
        from cuda.core import EventOptions  # type: ignore
    except Exception:
        from cuda.core.experimental import EventOptions  # type: ignore
    e0 = stream.record(options=EventOptions(enable_timing=True))
    busy(0.05, sync=False)
    e1 = stream.record(options=EventOptions(enable_timing=True))
    e1.sync()
    el = e1 - e0
    st = stamps.get()
    return {"event_ms": el, "globaltimer_ns": int(st[1] - st[0]), "gt_start": int(st[0]), "host_ns": time.time_ns()}


# -------------- sensor recording ----------------
class Rec:
    def __init__(self):
        self.stop = threading.Event()
        self.buf = []  # (ts_us, mw)
        self.fields = []  # (host_ns, id, ts_us, val)
        self.energy = []  # (host_ns_before, host_ns_after, mJ)
        self.last = 0

    def drain(self):
        try:
            _, s = nv.nvmlDeviceGetSamples(H, nv.NVML_TOTAL_POWER_SAMPLES, self.last)
        except nv.NVMLError_NotFound:
            return
        for x in s:
            if x.timeStamp > self.last:
                self.buf.append((int(x.timeStamp), int(x.sampleValue.uiVal)))
        if s:
            self.last = max(self.last, max(int(x.timeStamp) for x in s))

    def buf_loop(self):
        while not self.stop.is_set():
            self.drain()
            time.sleep(0.2)
        self.drain()

    def field_loop(self):
        while not self.stop.is_set():
            h = time.time_ns()
            for f in nv.nvmlDeviceGetFieldValues(H, [186, 185]):
                self.fields.append((h, int(f.fieldId), int(f.timestamp), int(f.value.uiVal)))
            time.sleep(0.002)

    def energy_loop(self):
        while not self.stop.is_set():
            a = time.time_ns()
            e = nv.nvmlDeviceGetTotalEnergyConsumption(H)
            b = time.time_ns()
            self.energy.append((a, b, int(e)))
            time.sleep(0.001)

    def __enter__(self):
        self.ths = [threading.Thread(target=f, daemon=True) for f in (self.buf_loop, self.field_loop, self.energy_loop)]
        for t in self.ths:
            t.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        for t in self.ths:
            t.join()


events = []  # (label, host_start_ns, host_end_ns, gt_start, gt_end)


def run_busy(label, dur):
    h0 = time.time_ns()
    busy(dur)
    h1 = time.time_ns()
    st = stamps.get()
    events.append((label, h0, h1, int(st[0]), int(st[1])))


@step("sensor_experiment")
def _sensor():
    busy(0.2)
    time.sleep(1.5)
    with Rec() as rec:
        time.sleep(2.0)
        run_busy("step3s", 3.0)
        time.sleep(2.0)
        for period in [0.010, 0.020, 0.030, 0.040, 0.050, 0.100, 0.200]:
            t_end = time.time() + 2.0
            while time.time() < t_end:
                run_busy(f"sq{int(period * 1000)}", period / 2)
                time.sleep(period / 2)
            time.sleep(1.0)
        for d in [0.002, 0.005, 0.010, 0.020, 0.050, 0.100, 0.2, 0.5, 1.0]:
            for _rep in range(3):
                run_busy(f"pulse{int(d * 1000)}", d)
                time.sleep(0.6)
        # doubling / back-to-back
        run_busy("dbl_a", 0.3)
        time.sleep(1.5)
        run_busy("dbl_b", 0.6)
        time.sleep(1.5)
        run_busy("b2b_1", 0.3)
        run_busy("b2b_2", 0.3)
        time.sleep(2.0)
    np.savez_compressed(
        f"{OUT}/sensor_probe.npz",
        buf=np.array(rec.buf, dtype=np.int64),
        fields=np.array(rec.fields, dtype=np.int64),
        energy=np.array(rec.energy, dtype=np.int64),
    )
    with open(f"{OUT}/sensor_events.json", "w") as f:
        json.dump(events, f)
    b = np.array(rec.buf)
    return {
        "n_buf": len(rec.buf),
        "buf_dt_med_us": float(np.median(np.diff(b[:, 0]))),
        "n_fields": len(rec.fields),
        "n_energy": len(rec.energy),
    }


@step("cupti")
def _cupti():
    from cupti import cupti  # type: ignore

    recs = []

    def buffer_requested():
        return 8 * 1024 * 1024, 0

    def buffer_completed(activities):
        for a in activities:
            recs.append(
                (getattr(a, "kind", None), getattr(a, "name", None), getattr(a, "start", None), getattr(a, "end", None))
            )

    cupti.activity_register_callbacks(buffer_requested, buffer_completed)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    h0 = time.time_ns()
    busy(0.01)
    busy(0.001)
    h1 = time.time_ns()
    cupti.activity_flush_all(1)
    cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    ts = None
    try:
        ts = cupti.get_timestamp()
    except Exception as exc:
        ts = repr(exc)
    return {
        "records": [(str(k), n, s, e) for k, n, s, e in recs[:5]],
        "host": [h0, h1],
        "cupti_ts": ts,
        "host_now": time.time_ns(),
        "dir": [x for x in dir(cupti) if "timestamp" in x.lower() or "activity_" in x.lower()][:40],
    }


with open(f"{OUT}/probe.json", "w") as f:
    json.dump(info, f, indent=1, default=str)
print("done")
