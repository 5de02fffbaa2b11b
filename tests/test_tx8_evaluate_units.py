"""The TX8 evaluator on tiny hand-priced plans: every number below is worked out by hand
from docs/tx8.md ("The cost model") in the comments, never by calling the code.

Preset tx8: T = 16 tiles, peak/T = 128e6/16 = 8e6 flops/us, vector 64 el/cycle x 1 GHz =
64000 el/us, DDR 200 GB/s = 200000 B/us, NoC 128000 B/us, hop 0.05, dma 0.5, launch 2,
SPM alignment 256, channel alignment 64, PE array [8, 16, 8], bf16 = 2 bytes.
A conversion costs 2 + 2*0.5 + bytes/200000 = 3 + bytes/200000.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from models.device import PRESETS
from models.layout import LayoutGraph, LayoutPlan, PlanStats, TimelineStep, parse_graph
from models.tx8 import TX8_PRESETS, Tx8Buffer, Tx8Conversion, Tx8Group, Tx8Section, Tx8Spec
from solver.tx8.evaluate import aligned, evaluate_tx8, nbytes

DEVICE = TX8_PRESETS["tx8"]


# ----------------------------------------------------------------------------- builders


def t(name: str, shape: list[int], kind: str = "activation", dtype: str = "bf16") -> dict:
    return {"name": name, "shape": shape, "dtype": dtype, "kind": kind}


def op(name: str, type_: str, inputs: list[str], outputs: list[str], **attrs) -> dict:
    return {"name": name, "type": type_, "inputs": inputs, "outputs": outputs, "attrs": attrs}


def graph(tensors: list[dict], ops: list[dict], outputs: list[str]) -> LayoutGraph:
    return parse_graph({"format": "layoutsat-graph", "version": 1, "name": "tiny",
                        "tensors": tensors, "ops": ops, "outputs": outputs})


def buf(tensor: str, role: str, nbytes_: int, offset: int, start: int = 0, end: int = 0,
        copies: int = 1) -> Tx8Buffer:
    return Tx8Buffer(tensor=tensor, role=role, bytes=nbytes_, copies=copies, offset=offset,
                     start=start, end=end)


def group(name: str, ops: list[str], *, sharding: list[int], split: list[int],
          latency: float, kind: str = "spm", layout: str = "aligned",
          buffers: list[Tx8Buffer] = (), loads: dict | None = None,
          stores: dict | None = None, peak: int = 0, compute: float = 0.0,
          load: float = 0.0, store: float = 0.0, reduce: float = 0.0, rs: int = 1,
          rp: int = 1, db: bool = False, resident: list[str] = (),
          template: str | None = None) -> Tx8Group:
    return Tx8Group(name=name, ops=ops, kind=kind, layout=layout, sharding=sharding,
                    reduce_sharding=rs, split=split, reduce_split=rp, double_buffer=db,
                    resident=list(resident), loads=loads or {}, stores=stores or {},
                    buffers=list(buffers), spm_peak_bytes=peak, compute_us=compute,
                    load_us=load, store_us=store, reduce_us=reduce, latency_us=latency,
                    template=template)


def conversion(tensor: str, old: str, new: str, consumers: list[str], nbytes_: int,
               latency: float) -> Tx8Conversion:
    return Tx8Conversion(tensor=tensor, from_=old, to=new, consumers=consumers, bytes=nbytes_,
                         latency_us=latency)


def plan(g: LayoutGraph, groups: list[Tx8Group], conversions: list[Tx8Conversion],
         layouts: dict[str, str], device: Tx8Spec = DEVICE) -> LayoutPlan:
    """A plan whose totals add up the hand-entered group and conversion latencies."""
    group_latency = sum(x.latency_us for x in groups)
    conversion_latency = sum(x.latency_us for x in conversions)
    section = Tx8Section(groups=groups, conversions=conversions, tensor_layouts=layouts,
                         group_latency_us=group_latency,
                         conversion_latency_us=conversion_latency,
                         spm_peak_bytes=max((x.spm_peak_bytes for x in groups), default=0))
    return LayoutPlan(status="feasible", solver="test", graph=g.name, device=device,
                      schedule=[o for x in groups for o in x.ops], tensors={}, ops={},
                      l1_timeline=[], l1_capacity_bytes_per_core=device.spm_bytes,
                      total_latency_us=group_latency + conversion_latency,
                      stats=PlanStats(wall_time_s=0.0), tx8=section)


def with_group(p: LayoutPlan, i: int = 0, **changes) -> LayoutPlan:
    assert changes.keys() <= Tx8Group.model_fields.keys()
    groups = list(p.tx8.groups)
    groups[i] = groups[i].model_copy(update=changes)
    return with_section(p, groups=groups)


def with_section(p: LayoutPlan, **changes) -> LayoutPlan:
    assert changes.keys() <= Tx8Section.model_fields.keys()
    return p.model_copy(update={"tx8": p.tx8.model_copy(update=changes)})


def kinds(g: LayoutGraph, p: LayoutPlan, device: Tx8Spec = DEVICE) -> set[str]:
    verdict = evaluate_tx8(g, p, device)
    assert not verdict.valid
    return {v.kind for v in verdict.violations}


def assert_valid(g: LayoutGraph, p: LayoutPlan, total: float,
                 device: Tx8Spec = DEVICE) -> None:
    verdict = evaluate_tx8(g, p, device)
    assert verdict.violations == []
    assert verdict.valid
    assert verdict.total_latency_us == pytest.approx(total, rel=1e-12, abs=1e-9)


# ----------------------------------------------------------------------------- matmul
# x [64, 256] (input) @ w [256, 512] (constant) -> y [64, 512] (graph output), bf16.
# K = 256, aligned(256) = 256, aligned(512) = 512: the aligned layout pads nothing here.
MM = graph([t("x", [64, 256], "input"), t("w", [256, 512], "constant"), t("y", [64, 512])],
           [op("mm", "matmul", ["x", "w"], ["y"])], ["y"])
MM_LAYOUTS = {"x": "compact", "y": "aligned"}
# x compact -> aligned for g0: 2 * 64*256*2 = 65536 B, 3 + 65536/200000 = 3.32768 us.
# y aligned -> compact for the host: 2 * 64*512*2 = 131072 B, 3 + 0.65536 = 3.65536 us.
MM_CONVERSIONS = [conversion("x", "compact", "aligned", ["g0"], 65536, 3.32768),
                  conversion("y", "aligned", "compact", ["host"], 131072, 3.65536)]

# Sharding [4, 4], one slice: e = [16, 128], k = 256, T' = 16.
#   x [e_M, k] = 16*256 = 4096 el = 8192 B; w [k, e_N] = 256*128 = 32768 el = 65536 B;
#   y [16, 128] = 2048 el = 4096 B. Offsets 0, 8192, 73728; peak 77824.
#   compute 2 * 16*256*128 / 8e6 = 1048576/8e6 = 0.131072
#   load x 0.5 + 16*8192/2e5 = 1.15536, w 0.5 + 16*65536/2e5 = 5.74288: 6.89824
#   store y 0.5 + 16*4096/2e5 = 0.82768
#   latency 2 + 6.89824 + 0.131072 + 0.82768 = 9.856992
#   loads x 16*8192 = 131072, w 16*65536 = 1048576; stores y 16*4096 = 65536
MM_44 = plan(MM, [group(
    "g0", ["mm"], sharding=[4, 4], split=[1, 1],
    buffers=[buf("x", "input", 8192, 0), buf("w", "weight", 65536, 8192),
             buf("y", "output", 4096, 73728)],
    loads={"x": 131072, "w": 1048576}, stores={"y": 65536}, peak=77824,
    compute=0.131072, load=6.89824, store=0.82768, latency=9.856992)],
    MM_CONVERSIONS, MM_LAYOUTS)

# Sharding [16, 1], one slice: e = [4, 512], k = 256.
#   x [4, 256] = 1024 el = 2048 B; w [256, 512] = 131072 el = 262144 B; y [4, 512] = 4096 B.
#   Offsets 0, 2048, 264192; peak 268288.
#   compute 2 * pad(4, 8)=8 * 256 * 512 / 8e6 = 2097152/8e6 = 0.262144
#   load x 0.5 + 16*2048/2e5 = 0.66384, w 0.5 + 16*262144/2e5 = 21.47152: 22.13536
#   store 0.82768; latency 2 + 22.13536 + 0.262144 + 0.82768 = 25.225184
MM_16 = plan(MM, [group(
    "g0", ["mm"], sharding=[16, 1], split=[1, 1],
    buffers=[buf("x", "input", 2048, 0), buf("w", "weight", 262144, 2048),
             buf("y", "output", 4096, 264192)],
    loads={"x": 32768, "w": 4194304}, stores={"y": 65536}, peak=268288,
    compute=0.262144, load=22.13536, store=0.82768, latency=25.225184)],
    MM_CONVERSIONS, MM_LAYOUTS)

# Sharding [4, 1] x reduce_sharding 4: e = [16, 512], k = 256/4 = 64.
#   x [16, 64] = 1024 el = 2048 B (an NE input: not 1/rs); w [64, 512] = 65536 B;
#   y [16, 512] = 8192 el, 1/rs -> 2048 el = 4096 B; psum of y 8192 el f32 = 32768 B.
#   Offsets 0, 2048, 67584, 71680; peak 104448.
#   compute 2 * 16 * pad(64, 16)=64 * 512 / 8e6 = 0.131072
#   reduce (4-1) (4*8192/4/128000 + 0.05) = 3 (0.064 + 0.05) = 0.342
#   load x 0.66384, w 5.74288: 6.40672; store y 0.5 + 16*4096/2e5 = 0.82768
#   latency 2 + 6.40672 + 0.131072 + 0.342 + 0.82768 = 9.707472
MM_RS4 = plan(MM, [group(
    "g0", ["mm"], sharding=[4, 1], split=[1, 1], rs=4,
    buffers=[buf("x", "input", 2048, 0), buf("w", "weight", 65536, 2048),
             buf("y", "output", 4096, 67584), buf("y", "psum", 32768, 71680)],
    loads={"x": 32768, "w": 1048576}, stores={"y": 65536}, peak=104448,
    compute=0.131072, load=6.40672, store=0.82768, reduce=0.342, latency=9.707472)],
    MM_CONVERSIONS, MM_LAYOUTS)

# Sharding [4, 4], split [2, 1], double-buffered: e = [8, 128], n = 2.
#   x [8, 256] = 4096 B x2; w [256, 128] = 65536 B x2; y [8, 128] = 2048 B x2.
#   Offsets 0, 8192, 139264; peak 139264 + 2*2048 = 143360.
#   compute 2*8*256*128/8e6 = 0.065536; load 0.82768 + 5.74288 = 6.57056;
#   store 0.5 + 16*2048/2e5 = 0.66384
#   latency 2 + (6.57056 + 0.065536 + 0.66384) + 1 * max(0.065536, 7.2344) = 16.534336
#   loads x 16*4096*2 = 131072, w 16*65536*2 = 2097152; stores y 16*2048*2 = 65536
MM_DB = plan(MM, [group(
    "g0", ["mm"], sharding=[4, 4], split=[2, 1], db=True,
    buffers=[buf("x", "input", 4096, 0, copies=2), buf("w", "weight", 65536, 8192, copies=2),
             buf("y", "output", 2048, 139264, copies=2)],
    loads={"x": 131072, "w": 2097152}, stores={"y": 65536}, peak=143360,
    compute=0.065536, load=6.57056, store=0.66384, latency=16.534336)],
    MM_CONVERSIONS, MM_LAYOUTS)

# The same with w resident: one copy of its whole per-tile part [256, 128] = 65536 B,
# loaded once: prologue 5.74288, loads w 16*65536 = 1048576. Offsets 0, 8192, 73728.
#   latency 2 + 5.74288 + (0.82768 + 0.065536 + 0.66384) + max(0.065536, 1.49152)
#         = 2 + 5.74288 + 1.557056 + 1.49152 = 10.791456
MM_RESIDENT = plan(MM, [group(
    "g0", ["mm"], sharding=[4, 4], split=[2, 1], db=True, resident=["w"],
    buffers=[buf("x", "input", 4096, 0, copies=2), buf("w", "weight", 65536, 8192),
             buf("y", "output", 2048, 73728, copies=2)],
    loads={"x": 131072, "w": 1048576}, stores={"y": 65536}, peak=77824,
    compute=0.065536, load=0.82768, store=0.66384, latency=10.791456)],
    MM_CONVERSIONS, MM_LAYOUTS)


@pytest.mark.parametrize(("p", "total"), [
    (MM_44, 9.856992 + 3.32768 + 3.65536),       # 16.840032
    (MM_16, 25.225184 + 3.32768 + 3.65536),      # 32.208224
    (MM_RS4, 9.707472 + 3.32768 + 3.65536),      # 16.690512
    (MM_DB, 16.534336 + 3.32768 + 3.65536),
    (MM_RESIDENT, 10.791456 + 3.32768 + 3.65536),
], ids=["sharding-4x4", "sharding-16x1", "reduce-sharding-4", "double-buffer", "resident"])
def test_matmul_plans_price_as_worked_by_hand(p: LayoutPlan, total: float) -> None:
    assert_valid(MM, p, total)


# ----------------------------------------------------------------------------- matmul + add
# h = x [64, 256] @ w [256, 512]; y = h + r (r an input [64, 512]); y the graph output.
# One group [mm, add], sharding [4, 4], reduce_split 2: e = [16, 128], k = 128, n = 2.
#   x [16, 128] = 2048 el = 4096 B, 0..0; w [128, 128] = 32768 B, 0..0;
#   r [16, 128] = 4096 B, 0..1 (read by add at 1); h intermediate 4096 B, 0..1;
#   y output 4096 B, 1..1; psum of h [16, 128] f32 = 8192 B, 0..0.
#   compute mm 2*16*128*128/8e6 = 0.065536 + add (once per output slice, so 1/2 per
#   slice) 2048/64000/2 = 0.016: 0.081536
#   load x 0.82768 + w 0.5 + 16*32768/2e5 = 3.12144 + r (only a vector op reads it,
#   w = 1/2) 0.82768/2 = 0.41384: 4.36296; store y 0.82768/2 = 0.41384
#   latency 2 + 2 (4.36296 + 0.081536 + 0.41384) = 11.716672
#   loads x 16*4096*2 = 131072, w 16*32768*2 = 1048576, r 16*4096*2/2 = 65536;
#   stores y 16*4096*2/2 = 65536
# Conversions: x 3.32768; r 2 * 65536 B: 3.65536; y to the host 3.65536.
MA = graph([t("x", [64, 256], "input"), t("w", [256, 512], "constant"),
            t("r", [64, 512], "input"), t("h", [64, 512]), t("y", [64, 512])],
           [op("mm", "matmul", ["x", "w"], ["h"]), op("add", "add", ["h", "r"], ["y"])], ["y"])
MA_PLAN = plan(MA, [group(
    "g0", ["mm", "add"], sharding=[4, 4], split=[1, 1], rp=2,
    buffers=[buf("x", "input", 4096, 0), buf("w", "weight", 32768, 4096),
             buf("r", "input", 4096, 36864, 0, 1), buf("h", "intermediate", 4096, 40960, 0, 1),
             buf("y", "output", 4096, 45056, 1, 1), buf("h", "psum", 8192, 49152)],
    loads={"x": 131072, "w": 1048576, "r": 65536}, stores={"y": 65536}, peak=57344,
    compute=0.081536, load=4.36296, store=0.41384, latency=11.716672)],
    [conversion("x", "compact", "aligned", ["g0"], 65536, 3.32768),
     conversion("r", "compact", "aligned", ["g0"], 131072, 3.65536),
     conversion("y", "aligned", "compact", ["host"], 131072, 3.65536)],
    {"x": "compact", "r": "compact", "h": "aligned", "y": "aligned"})


def test_a_reduce_split_group_with_an_intermediate_and_a_vector_only_input() -> None:
    assert_valid(MA, MA_PLAN, 11.716672 + 3.32768 + 3.65536 + 3.65536)  # 22.355072


# ----------------------------------------------------------------------------- q k^T
# y = q [64, 40] @ kt [128, 40]^T (transpose_b; both inputs), y [64, 128].
# Sharding [4, 2] x rs 2: e = [16, 64], k = 40/2 = 20, aligned(20) = 32.
#   q [16, k] -> [16, 32] = 512 el = 1024 B; kt [e_N, k] -> [64, 32] = 4096 B;
#   y [16, 64] = 1024 el, 1/2 -> 512 el = 1024 B; psum 1024 el f32 = 4096 B.
#   compute 2 * 16 * pad(20, 16)=32 * 64 / 8e6 = 0.008192
#   reduce 1 * (4*1024/2/128000 + 0.05) = 0.016 + 0.05 = 0.066
#   load q 0.5 + 16*1024/2e5 = 0.58192, kt 0.5 + 16*4096/2e5 = 0.82768: 1.4096
#   store 0.58192; latency 2 + 1.4096 + 0.008192 + 0.066 + 0.58192 = 4.065712
# Conversions (aligned(40) = 64): q 64*40*2 + 64*64*2 = 13312 B: 3.06656;
#   kt 10240 + 16384 = 26624 B: 3.13312; y 2 * 16384 = 32768 B: 3.16384.
QK = graph([t("q", [64, 40], "input"), t("kt", [128, 40], "input"), t("y", [64, 128])],
           [op("qk", "matmul", ["q", "kt"], ["y"], transpose_b=True)], ["y"])
QK_PLAN = plan(QK, [group(
    "g0", ["qk"], sharding=[4, 2], split=[1, 1], rs=2,
    buffers=[buf("q", "input", 1024, 0), buf("kt", "input", 4096, 1024),
             buf("y", "output", 1024, 5120), buf("y", "psum", 4096, 6144)],
    loads={"q": 16384, "kt": 65536}, stores={"y": 16384}, peak=10240,
    compute=0.008192, load=1.4096, store=0.58192, reduce=0.066, latency=4.065712)],
    [conversion("q", "compact", "aligned", ["g0"], 13312, 3.06656),
     conversion("kt", "compact", "aligned", ["g0"], 26624, 3.13312),
     conversion("y", "aligned", "compact", ["host"], 32768, 3.16384)],
    {"q": "compact", "kt": "compact", "y": "aligned"})


def test_transpose_b_activation_operands_pad_their_last_dim_k() -> None:
    assert_valid(QK, QK_PLAN, 4.065712 + 3.06656 + 3.13312 + 3.16384)  # 13.429232


# ----------------------------------------------------------------------------- conv2d
# x [1, 8, 8, 16] (input) conv w [32, 16, 3, 3], stride 1, padding 1 -> y [1, 8, 8, 32].
# Sharding [1, 4, 4, 1]: e = [1, 2, 2, 32], k = C = 16 (aligned(16) = 16).
#   x [1, min(8+2, (2-1)*1 + 2*1 + 1) = 4, 4, 16] = 256 el = 512 B;
#   w [32, 16, 3, 3] = 4608 el = 9216 B; y [1, 2, 2, 32] = 128 el = 256 B.
#   compute 2 * pad(4, 8)=8 * pad(144, 16)=144 * pad(32, 8)=32 / 8e6 = 73728/8e6 = 0.009216
#   load x 0.5 + 16*512/2e5 = 0.54096, w 0.5 + 16*9216/2e5 = 1.23728: 1.77824
#   store 0.5 + 16*256/2e5 = 0.52048; latency 2 + 1.77824 + 0.009216 + 0.52048 = 4.307936
# No conversions: 16 and 32 channels are one aligned Cx block, the same in both layouts.
CONV = graph([t("x", [1, 8, 8, 16], "input"), t("w", [32, 16, 3, 3], "constant"),
              t("y", [1, 8, 8, 32])],
             [op("cv", "conv2d", ["x", "w"], ["y"], padding=[1, 1])], ["y"])
CONV_PLAN = plan(CONV, [group(
    "g0", ["cv"], sharding=[1, 4, 4, 1], split=[1, 1, 1, 1],
    buffers=[buf("x", "input", 512, 0), buf("w", "weight", 9216, 512),
             buf("y", "output", 256, 9728)],
    loads={"x": 8192, "w": 147456}, stores={"y": 4096}, peak=9984,
    compute=0.009216, load=1.77824, store=0.52048, latency=4.307936)],
    [], {"x": "compact", "y": "aligned"})


def test_conv_reads_its_halo_and_pads_to_the_pe_array() -> None:
    assert_valid(CONV, CONV_PLAN, 4.307936)


# ----------------------------------------------------------------------------- vector ops
# softmax over the last dim of x [64, 100] -> y, sharding [16, 1]: e = [4, 100].
#   compact: x, y 400 el = 800 B each (offsets 0, 1024; peak 2048); compute 400*4/64000 =
#   0.025; load = store = 0.5 + 16*800/2e5 = 0.564; latency 2 + 0.564*2 + 0.025 = 3.153.
#   aligned: aligned(100) = 128: 512 el = 1024 B; load = store = 0.5 + 16*1024/2e5 =
#   0.58192; compute still 400 el (0.025); latency 2 + 2*0.58192 + 0.025 = 3.18884;
#   conversions x, y: 64*100*2 + 64*128*2 = 29184 B: 3 + 0.14592 = 3.14592 each.
SM = graph([t("x", [64, 100], "input"), t("y", [64, 100])],
           [op("sm", "softmax", ["x"], ["y"])], ["y"])


def softmax_plan(layout: str) -> LayoutPlan:
    size, move, latency = (800, 0.564, 3.153) if layout == "compact" else (1024, 0.58192,
                                                                           3.18884)
    conversions = [] if layout == "compact" else [
        conversion("x", "compact", "aligned", ["g0"], 29184, 3.14592),
        conversion("y", "aligned", "compact", ["host"], 29184, 3.14592)]
    return plan(SM, [group(
        "g0", ["sm"], layout=layout, sharding=[16, 1], split=[1, 1],
        buffers=[buf("x", "input", size, 0), buf("y", "output", size, 1024)],
        loads={"x": 16 * size}, stores={"y": 16 * size}, peak=2048,
        compute=0.025, load=move, store=move, latency=latency)],
        conversions, {"x": "compact", "y": layout})


SM_PLAN = softmax_plan("compact")


def test_softmax_compact_and_aligned() -> None:
    assert_valid(SM, SM_PLAN, 3.153)
    assert_valid(SM, softmax_plan("aligned"), 3.18884 + 2 * 3.14592)  # 9.48068


# reduce_sum over dim 1 of x [64, 128] (keepdim) -> y [64, 1], compact, sharding [16, 1]:
#   e = [4, 1]; input slice [4, 128] = 512 el = 1024 B; y [4, 1] = 8 B (offsets 0, 1024).
#   compute 512/64000 = 0.008; load 0.5 + 16*1024/2e5 = 0.58192; store 0.5 + 16*8/2e5 =
#   0.50064; latency 2 + 0.58192 + 0.008 + 0.50064 = 3.09056
RED = graph([t("x", [64, 128], "input"), t("y", [64, 1])],
            [op("rd", "reduce_sum", ["x"], ["y"], dims=[1])], ["y"])
RED_PLAN = plan(RED, [group(
    "g0", ["rd"], layout="compact", sharding=[16, 1], split=[1, 1],
    buffers=[buf("x", "input", 1024, 0), buf("y", "output", 8, 1024)],
    loads={"x": 16384}, stores={"y": 128}, peak=1280,
    compute=0.008, load=0.58192, store=0.50064, latency=3.09056)],
    [], {"x": "compact", "y": "compact"})

# max_pool2d 2x2 of x [1, 8, 8, 16] -> y [1, 4, 4, 16] on one tile (T' = 1): e = y.
#   input [1, min(8, 3*2 + 1 + 1) = 8, 8, 16] = 1024 el = 2048 B; y 256 el = 512 B.
#   compute 256 * 4 (window) / 64000 = 0.016; load 0.5 + 2048/2e5 = 0.51024;
#   store 0.5 + 512/2e5 = 0.50256; latency 2 + 0.51024 + 0.016 + 0.50256 = 3.0288
POOL = graph([t("x", [1, 8, 8, 16], "input"), t("y", [1, 4, 4, 16])],
             [op("mp", "max_pool2d", ["x"], ["y"], kernel_size=[2, 2])], ["y"])
POOL_PLAN = plan(POOL, [group(
    "g0", ["mp"], layout="compact", sharding=[1, 1, 1, 1], split=[1, 1, 1, 1],
    buffers=[buf("x", "input", 2048, 0), buf("y", "output", 512, 2048)],
    loads={"x": 2048}, stores={"y": 512}, peak=2560,
    compute=0.016, load=0.51024, store=0.50256, latency=3.0288)],
    [], {"x": "compact", "y": "compact"})


def test_reduction_reads_whole_reduced_dims_and_pooling_runs_on_one_tile() -> None:
    assert_valid(RED, RED_PLAN, 3.09056)
    assert_valid(POOL, POOL_PLAN, 3.0288)


# ----------------------------------------------------------------------------- ddr ops
# slice x [64, 256] -> s [64, 128], reshape s -> y [128, 64], all compact.
#   slice: 2 + 2*0.5 + (32768 + 16384)/2e5 = 3.24576; reshape: a view, 0.
DDR = graph([t("x", [64, 256], "input"), t("s", [64, 128]), t("y", [128, 64])],
            [op("sl", "slice", ["x"], ["s"], starts=[0, 0], ends=[64, 128]),
             op("rsh", "reshape", ["s"], ["y"])], ["y"])
DDR_PLAN = plan(DDR, [
    group("g0", ["sl"], kind="ddr", layout="compact", sharding=[1, 1], split=[1, 1],
          loads={"x": 32768}, stores={"s": 16384}, latency=3.24576),
    group("g1", ["rsh"], kind="ddr", layout="compact", sharding=[1, 1], split=[1, 1],
          latency=0.0)],
    [], {"x": "compact", "s": "compact", "y": "compact"})


def test_ddr_groups_move_whole_tensors_and_a_reshape_is_free() -> None:
    assert_valid(DDR, DDR_PLAN, 3.24576)


def test_sizes() -> None:
    assert [aligned(c, 64) for c in (1, 3, 4, 5, 17, 32, 33, 64, 100)] == \
        [4, 4, 4, 8, 32, 32, 64, 64, 128]
    assert nbytes(3, "bfp8") == 4  # 3 * 1.0625 = 3.1875
    assert nbytes(16, "bfp4") == 9  # 16 * 0.5625
    assert nbytes(3, "uint32") == 12


# ----------------------------------------------------------------------------- tampering


def relu_graph(pairs: list[tuple[str, str, str]], tensors: list[str], outputs: list[str],
               types: dict[str, str] | None = None) -> LayoutGraph:
    """Ops (name, input, output) of one shape [64, 64]; 'x' the input."""
    types = types or {}
    return graph([t("x", [64, 64], "input"), *(t(n, [64, 64]) for n in tensors)],
                 [op(n, types.get(n, "relu"), i.split(","), [o]) for n, i, o in pairs], outputs)


# x -> a = relu(x) -> b = exp(a); c = add(a, b). Grouping {relu, add} without exp.
NONCONVEX = relu_graph([("ra", "x", "a"), ("ex", "a", "b"), ("ad", "a,b", "c")],
                       ["a", "b", "c"], ["c"], {"ex": "exp", "ad": "add"})
# Two relus of x in one group share only their DDR input.
DISJOINT = relu_graph([("r1", "x", "a"), ("r2", "x", "b")], ["a", "b"], ["a", "b"])
# a = relu(x); y = a @ w: a matmul fed from inside its group.
HEADS = graph([t("x", [64, 64], "input"), t("w", [64, 64], "constant"), t("a", [64, 64]),
               t("y", [64, 64])],
              [op("ra", "relu", ["x"], ["a"]), op("mm", "matmul", ["a", "w"], ["y"])], ["y"])
# A depthwise conv (groups 16).
DEPTHWISE = graph([t("x", [1, 8, 8, 16], "input"), t("w", [16, 1, 3, 3], "constant"),
                   t("y", [1, 8, 8, 16])],
                  [op("cv", "conv2d", ["x", "w"], ["y"], padding=[1, 1], groups=16)], ["y"])


def loose(g: LayoutGraph, groups: list[list[str]], **fields) -> LayoutPlan:
    """A plan whose numbers are not meant to be right: only its grouping is under test."""
    return plan(g, [group(f"g{i}", ops, sharding=fields.get("sharding", [1, 1]),
                          split=fields.get("split", [1, 1]), latency=1.0,
                          layout=fields.get("layout", "aligned"), rs=fields.get("rs", 1))
                    for i, ops in enumerate(groups)], [], {})


BIG_SPM_OFFSET = 3 * 2**20  # y placed past the end of SPM
DIFFERENT_DEVICE = DEVICE.model_copy(update={"spm_bytes": 2**20})
SMALL_DDR = DEVICE.model_copy(update={"ddr_bytes": 1000})
MM_SMALL_DDR = MM_44.model_copy(update={"device": SMALL_DDR})


def buffers_with(p: LayoutPlan, i: int, **changes) -> list[Tx8Buffer]:
    bufs = list(p.tx8.groups[0].buffers)
    bufs[i] = bufs[i].model_copy(update=changes)
    return bufs


TAMPERED: list[tuple[str, LayoutGraph, Callable[[], LayoutPlan]]] = [
    ("tx8.section", MM, lambda: MM_44.model_copy(update={"tx8": None})),
    ("tx8.device", MM, lambda: MM_44.model_copy(update={"device": DIFFERENT_DEVICE})),
    ("tx8.device", MM, lambda: MM_44.model_copy(update={"device": PRESETS["wormhole_n150"]})),
    ("tx8.plan", MM, lambda: MM_44.model_copy(update={"l1_timeline": [
        TimelineStep(step=0, op="mm", bytes_per_core=0)]})),
    ("tx8.coverage", MA, lambda: with_group(MA_PLAN, ops=["mm"])),
    ("tx8.coverage", DDR, lambda: with_group(DDR_PLAN, 1, ops=["rsh", "sl"])),
    ("tx8.order", DDR, lambda: DDR_PLAN.model_copy(update={"schedule": ["rsh", "sl"]})),
    ("tx8.order", DDR, lambda: with_section(DDR_PLAN, groups=DDR_PLAN.tx8.groups[::-1])),
    ("tx8.order", MA, lambda: with_group(MA_PLAN, ops=["add", "mm"])),
    ("tx8.group", DDR, lambda: with_group(DDR_PLAN, kind="spm")),
    ("tx8.group", MM, lambda: with_group(MM_44, kind="ddr")),
    ("tx8.group", MM, lambda: with_group(MM_44, template="g9")),
    ("tx8.group", NONCONVEX, lambda: loose(NONCONVEX, [["ra", "ad"], ["ex"]])),
    ("tx8.group", DISJOINT, lambda: loose(DISJOINT, [["r1", "r2"]])),
    ("tx8.group", HEADS, lambda: loose(HEADS, [["ra", "mm"]])),
    ("tx8.group", MM, lambda: with_section(MM_44, groups=[*MM_44.tx8.groups,
                                                          MM_44.tx8.groups[0]])),
    ("tx8.layout", MM, lambda: with_group(MM_44, layout="compact")),
    ("tx8.layout", DDR, lambda: with_group(DDR_PLAN, layout="aligned")),
    ("tx8.layout", MM, lambda: with_section(MM_44, tensor_layouts={"x": "compact",
                                                                   "y": "compact"})),
    ("tx8.layout", MM, lambda: with_section(MM_44, tensor_layouts={"x": "compact"})),
    ("tx8.layout", MM, lambda: with_section(MM_44, tensor_layouts={**MM_LAYOUTS,
                                                                   "w": "compact"})),
    ("tx8.sharding", MM, lambda: with_group(MM_44, sharding=[4, 2])),
    ("tx8.sharding", MM, lambda: with_group(MM_44, sharding=[4])),
    ("tx8.sharding", RED, lambda: with_group(RED_PLAN, sharding=[1, 16])),
    ("tx8.sharding", SM, lambda: with_group(SM_PLAN, sharding=[4, 4])),
    ("tx8.sharding", SM, lambda: with_group(SM_PLAN, sharding=[8, 1], reduce_sharding=2)),
    ("tx8.sharding", DEPTHWISE, lambda: loose(DEPTHWISE, [["cv"]], sharding=[1, 4, 2, 1],
                                              split=[1, 1, 1, 1], rs=2)),
    ("tx8.split", MM, lambda: with_group(MM_44, split=[17, 1])),
    ("tx8.split", MM, lambda: with_group(MM_44, split=[0, 1])),
    ("tx8.split", MM, lambda: with_group(MM_RS4, reduce_split=128)),
    ("tx8.split", SM, lambda: with_group(SM_PLAN, split=[1, 2])),
    ("tx8.split", SM, lambda: with_group(SM_PLAN, reduce_split=2)),
    ("tx8.resident", MM, lambda: with_group(MM_44, resident=["x"])),
    ("tx8.buffers", MM, lambda: with_group(MM_44, buffers=buffers_with(MM_44, 1, bytes=65024))),
    ("tx8.buffers", MM, lambda: with_group(MM_44, buffers=buffers_with(MM_44, 2, end=1))),
    ("tx8.buffers", MM, lambda: with_group(MM_44, double_buffer=True)),
    ("tx8.buffers", MM, lambda: with_group(MM_44, buffers=MM_44.tx8.groups[0].buffers[:2])),
    ("tx8.spm", MM, lambda: with_group(MM_44, buffers=buffers_with(MM_44, 1, offset=8300))),
    ("tx8.spm", MM, lambda: with_group(MM_44, buffers=buffers_with(MM_44, 1, offset=4096))),
    ("tx8.spm", MM, lambda: with_group(MM_44, spm_peak_bytes=77825)),
    ("tx8.spm", MM, lambda: with_group(
        MM_44, spm_peak_bytes=BIG_SPM_OFFSET + 4096,
        buffers=buffers_with(MM_44, 2, offset=BIG_SPM_OFFSET))),
    ("tx8.latency", MM, lambda: with_group(MM_44, latency_us=9.9)),
    ("tx8.latency", MM, lambda: with_group(MM_44, compute_us=0.2)),
    ("tx8.latency", MM, lambda: with_group(MM_44, reduce_us=0.1)),
    ("tx8.latency", MM, lambda: with_group(MM_44, loads={"x": 131072})),
    ("tx8.latency", MM, lambda: with_group(MM_44, stores={"y": 1})),
    ("tx8.latency", DDR, lambda: with_group(DDR_PLAN, 1, latency_us=1.0)),
    ("tx8.latency", DDR, lambda: with_group(DDR_PLAN, 0, loads={"x": 16384})),
    ("tx8.conversions", MM, lambda: with_section(MM_44, conversions=MM_CONVERSIONS[1:])),
    ("tx8.conversions", MM, lambda: with_section(MM_44, conversions=[
        MM_CONVERSIONS[0].model_copy(update={"bytes": 65535}), MM_CONVERSIONS[1]])),
    ("tx8.conversions", MM, lambda: with_section(MM_44, conversions=[
        MM_CONVERSIONS[0].model_copy(update={"consumers": ["g0", "host"]}),
        MM_CONVERSIONS[1]])),
    ("tx8.conversions", MM, lambda: with_section(MM_44, conversions=[
        *MM_CONVERSIONS, conversion("w", "compact", "aligned", ["g0"], 1, 1.0)])),
    ("tx8.conversions", MM, lambda: with_section(MM_44, conversions=[
        MM_CONVERSIONS[0].model_copy(update={"latency_us": 3.0}), MM_CONVERSIONS[1]])),
    ("tx8.total", MM, lambda: MM_44.model_copy(update={"total_latency_us": 16.0})),
    ("tx8.total", MM, lambda: with_section(MM_44, group_latency_us=1.0)),
    ("tx8.total", MM, lambda: with_section(MM_44, conversion_latency_us=1.0)),
    ("tx8.total", MM, lambda: with_section(MM_44, spm_peak_bytes=1)),
]


@pytest.mark.parametrize(("kind", "g", "make"), TAMPERED,
                         ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(TAMPERED)])
def test_a_tampered_plan_is_reported(kind: str, g: LayoutGraph,
                                     make: Callable[[], LayoutPlan]) -> None:
    assert kind in kinds(g, make())


def test_ddr_capacity_is_checked_against_the_device_the_plan_is_for() -> None:
    # 64*256*2 + 256*512*2 + 64*512*2 = 32768 + 262144 + 65536 > 1000 bytes
    assert kinds(MM, MM_SMALL_DDR, SMALL_DDR) == {"tx8.ddr"}


def test_the_total_returned_is_recomputed_even_when_the_plan_lies() -> None:
    lying = with_section(with_group(MM_44, latency_us=1.0, compute_us=0.0),
                         group_latency_us=1.0)
    lying = lying.model_copy(update={"total_latency_us": 1.0 + 3.32768 + 3.65536})
    verdict = evaluate_tx8(MM, lying, DEVICE)
    assert not verdict.valid
    assert {v.kind for v in verdict.violations} == {"tx8.latency", "tx8.total"}
    assert verdict.total_latency_us == pytest.approx(9.856992 + 3.32768 + 3.65536, abs=1e-9)
    assert all(v.where.startswith(("groups.g0", "tx8.", "total")) for v in verdict.violations)


def test_a_violation_names_where_it_is() -> None:
    verdict = evaluate_tx8(MM, with_section(MM_44, tensor_layouts={"x": "compact",
                                                                    "y": "compact"}), DEVICE)
    assert [(v.kind, v.where) for v in verdict.violations] == [("tx8.layout", "tensors.y")]
