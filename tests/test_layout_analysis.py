"""Shard arithmetic, legality rules, candidate generation and the cost model, pinned by hand."""

from __future__ import annotations

import math

import pytest

from models.device import PRESETS, DeviceSpec
from models.layout import parse_graph
from models.layout_ops import attrs_model
from solver.layout import cost
from solver.layout.memory import (
    DRAM,
    L1_INTERLEAVED,
    Geometry,
    MemConfig,
    sharded,
    sharded_configs,
)
from solver.layout.ops import Candidate, OperandSig, OpSig, build_candidate, candidates, input_rule
from solver.layout.problem import analyze
from tests.layout_fixtures import op, tensor, tiny

WH, BH = PRESETS["wormhole_n150"], PRESETS["blackhole_p150"]
FIXED = 2.0 + 4.0  # every op and copy: host dispatch + device op latency (both presets)
# Interleaved DRAM traffic reaches 0.64 of the 288 GB/s on a Wormhole (184,320 B/us; one
# bank's share 15,360 B/us) and 0.8 of the 512 GB/s on a Blackhole (409,600 B/us).
WH_DRAM, WH_BANK = 288_000 * 0.64, 24_000 * 0.64
BERT_ACT = Geometry.of([1, 384, 768], "bf16")  # 12 x 24 tiles


# ------------------------------------------------------------------ shard arithmetic

def test_tensors_collapse_to_2d_and_pad_to_tiles():
    g = Geometry.of([2, 3, 100, 50], "bf16")
    assert (g.rows, g.cols, g.ht, g.wt) == (600, 50, 19, 2)
    assert Geometry.of([77], "f32").ht == 1 and Geometry.of([77], "f32").wt == 3


@pytest.mark.parametrize(("dtype", "tile_bytes"),
                         [("bf16", 2048), ("f32", 4096), ("bfp8", 1088), ("bfp4", 576)])
def test_bytes_per_tile(dtype, tile_bytes):
    assert Geometry.of([32, 32], dtype).total_bytes == tile_bytes


@pytest.mark.parametrize(("cfg", "shard", "per_core"), [
    (sharded("height_sharded", 1, 12), (32, 768), 24 * 2048),
    (sharded("height_sharded", 1, 6), (64, 768), 48 * 2048),
    (sharded("width_sharded", 1, 24), (384, 32), 12 * 2048),
    (sharded("width_sharded", 1, 8), (384, 96), 36 * 2048),
    (sharded("block_sharded", 4, 8), (96, 96), 9 * 2048),
    (sharded("block_sharded", 6, 6), (64, 128), 8 * 2048),
])
def test_shard_shapes_and_bytes_per_core(cfg, shard, per_core):
    assert BERT_ACT.shard_shape(cfg) == shard
    assert BERT_ACT.bytes_per_core(cfg, 64) == per_core


def test_interleaved_l1_costs_ceil_tiles_over_cores_and_dram_costs_no_l1():
    assert BERT_ACT.bytes_per_core(L1_INTERLEAVED, 64) == math.ceil(288 / 64) * 2048
    assert BERT_ACT.bytes_per_core(L1_INTERLEAVED, 130) == math.ceil(288 / 130) * 2048
    assert BERT_ACT.bytes_per_core(DRAM, 64) == 0


def test_grid_enumeration_dedupes_shard_shapes_keeps_every_core_busy_largest_first():
    configs = sharded_configs(BERT_ACT, WH.grid_rc)
    for layout in ("height_sharded", "width_sharded", "block_sharded"):
        mine = [c for c in configs if c.layout == layout]
        shapes = [BERT_ACT.shard_shape(c) for c in mine]
        assert len(shapes) == len(set(shapes))
        assert all(BERT_ACT.fits_grid(c) for c in mine)
    heights = sorted(c.grid[1] for c in configs if c.layout == "height_sharded")
    assert heights == [1, 2, 3, 4, 6, 12]  # 12 tile rows: 5 or 7..11 cores would idle one
    assert not BERT_ACT.fits_grid(sharded("height_sharded", 1, 7))
    cores = [c.grid[0] * c.grid[1] for c in configs]
    assert cores == sorted(cores, reverse=True)
    assert all(c.grid[0] <= 8 and c.grid[1] <= 8 for c in configs if c.layout == "block_sharded")


def test_memory_config_text_round_trips():
    for text in ("dram:interleaved", "l1:interleaved", "l1:block_sharded:4x8"):
        assert MemConfig.parse(text).key == text
    with pytest.raises(ValueError):
        MemConfig.parse("l1:block_sharded:0x8")


def test_usable_l1_is_95_percent_of_the_unreserved_l1():
    assert WH.usable_l1_bytes == math.floor(0.95 * (1_499_136 - 103_712))
    assert BH.usable_l1_bytes == math.floor(0.95 * (1_572_864 - 98_304))
    assert WH.grid_rc == (8, 8) and BH.grid_rc == (10, 13)
    assert PRESETS["wormhole_n300"].grid_rc == (8, 8)


# --------------------------------------------------------------------- legality rules

def sig(op_type: str, inputs: list[tuple], output: tuple, **attrs) -> OpSig:
    def operand(spec: tuple) -> OperandSig:
        shape, *rest = spec
        return OperandSig(tuple(shape), rest[0] if rest else "bf16", "const" in rest)
    return OpSig.of(op_type, attrs_model(op_type).model_validate(attrs),
                    [operand(s) for s in inputs], [operand(output)])


MATMUL = sig("matmul", [([384, 768],), ([768, 768],)], ([384, 768],))
ADD = sig("add", [([384, 768],), ([384, 768],)], ([384, 768],))
H12 = sharded("height_sharded", 1, 12)
H6 = sharded("height_sharded", 1, 6)
B48 = sharded("block_sharded", 4, 8)


def rule_of(result) -> str:
    assert isinstance(result, str), "expected a rule violation"
    return result.split(":")[0]


def test_matmul_output_is_never_l1_interleaved():
    got = build_candidate(MATMUL, L1_INTERLEAVED, {}, WH)
    assert rule_of(got) == "matmul.output_l1_interleaved"


def test_matmul_rhs_is_never_sharded():
    assert input_rule(MATMUL, H12, 1, H12).startswith("matmul.rhs_sharded")
    assert input_rule(MATMUL, H12, 1, L1_INTERLEAVED) is None


def test_matmul_program_configs_follow_the_output_sharding():
    mm = {c.output.layout: c.program for c in candidates(MATMUL, WH, 4096) if c.output.is_sharded}
    assert mm["height_sharded"]["program"] == "1d_mcast_in1"
    assert mm["width_sharded"]["program"] == "1d_mcast_in0"
    assert mm["block_sharded"]["program"] == "2d_mcast"
    c = build_candidate(MATMUL, B48, {"in0_block_w": 2}, WH)
    assert isinstance(c, Candidate)
    assert c.program == {"program": "2d_mcast", "per_core_M": 3, "per_core_N": 3, "in0_block_w": 2,
                         "out_subblock_h": 1, "out_subblock_w": 3}
    assert B48 in c.accepts[0] and c.accepts[1].keys() == {DRAM, L1_INTERLEAVED}
    assert rule_of(build_candidate(MATMUL, B48, {"in0_block_w": 5}, WH)) == "knobs.unknown"


def test_binary_ops_reject_core_shrink_on_either_operand():
    for i in (0, 1):
        assert input_rule(ADD, H6, i, H12).startswith("binary.core_shrink")
        assert input_rule(ADD, H12, i, H12) is None
        assert input_rule(ADD, H12, i, H6).startswith("add.shard_mismatch")


def test_constants_are_read_from_dram():
    s = sig("add", [([384, 768],), ([384, 768], "bf16", "const")], ([384, 768],))
    assert input_rule(s, H12, 1, L1_INTERLEAVED).startswith("operand.constant_dram")


@pytest.mark.parametrize(("dim", "layout", "rule"), [
    (-1, "height_sharded", None), (-1, "width_sharded", "concat.width_concat_needs_height_sharded"),
    (-2, "width_sharded", None), (-2, "height_sharded", "concat.height_concat_needs_width_sharded"),
    (-1, "block_sharded", "concat.block_sharded"), (0, "height_sharded", "concat.interleaved_only"),
])
def test_concat_layout_rules(dim, layout, rule):
    ins = [([2, 128, 64],), ([2, 128, 64],)]
    out = [2, 128, 128] if dim == -1 else [2, 256, 64] if dim == -2 else [4, 128, 64]
    s = sig("concat", ins, (out,), dim=dim)
    grid = (2, 2) if layout == "block_sharded" else (1, 2)
    got = build_candidate(s, sharded(layout, *grid), {}, WH)
    assert (rule_of(got) if isinstance(got, str) else None) == rule


def test_concat_inputs_share_one_layout_and_grid():
    s = sig("concat", [([256, 64],), ([256, 64],)], ([256, 128],), dim=-1)
    out = sharded("height_sharded", 1, 8)
    assert input_rule(s, out, 1, out) is None
    assert input_rule(s, out, 1, sharded("height_sharded", 1, 4)).startswith("concat.inputs_share")
    assert input_rule(s, L1_INTERLEAVED, 0, out).startswith("concat.inputs_share")


@pytest.mark.parametrize("op_type", ["reshape", "permute"])
def test_reshape_and_permute_reject_width_sharded_input(op_type):
    attrs = {"perm": [1, 0]} if op_type == "permute" else {}
    out = [384, 768] if op_type == "reshape" else [768, 384]
    s = sig(op_type, [([384, 768],)], (out,), **attrs)
    assert input_rule(s, DRAM, 0, sharded("width_sharded", 1, 24)).startswith(
        f"{op_type}.width_sharded_input")
    assert input_rule(s, DRAM, 0, H12) is None


def test_slice_is_interleaved_only_and_embedding_output_never_sharded():
    s = sig("slice", [([384, 768],)], ([384, 384],), starts=[0, 0], ends=[384, 384])
    assert rule_of(build_candidate(s, H12, {}, WH)) == "slice.interleaved_only"
    assert input_rule(s, DRAM, 0, H12).startswith("slice.interleaved_only")
    e = sig("embedding", [([1, 384], "uint32"), ([30522, 768], "bf16", "const")], ([1, 384, 768],))
    assert rule_of(build_candidate(e, H12, {}, WH)) == "embedding.output_sharded"
    assert isinstance(build_candidate(e, L1_INTERLEAVED, {}, WH), Candidate)


def test_conv2d_act_block_h_knob_and_scratch():
    s = sig("conv2d", [([1, 56, 56, 64],), ([64, 64, 3, 3], "bfp8", "const")], ([1, 56, 56, 64],),
            padding=[1, 1])
    hs = [c for c in candidates(s, WH, 4096) if c.output.layout == "height_sharded"]
    knobs = {dict(c.knobs)["act_block_h_override"] for c in hs}
    assert knobs == {0, 64, 32}
    by_output: dict = {}
    for c in hs:
        by_output.setdefault(c.output, []).append(c)
    widest = next(cs for cs in by_output.values() if len(cs) == 3)  # shards of 3+ tile rows
    scratch = {dict(c.knobs)["act_block_h_override"]: c.cb_bytes_per_core for c in widest}
    assert scratch[32] < scratch[64] <= scratch[0]
    assert rule_of(build_candidate(s, L1_INTERLEAVED, {"act_block_h_override": 0}, WH)) == (
        "conv2d.output_l1_interleaved")


def test_a_3x3_conv_pays_its_halo_op_and_a_1x1_conv_none():
    """Height-sharded on 7x7 cores (56 * 56 = 3,136 output rows: 98 tile rows, 2 per
    core): each core fetches (3 - 1) padded input rows of 56 + 2 pixels and 2 more
    pixels, all 64 channels of bf16, over the NoC, in an op of its own (dispatch 2 us +
    op latency 4 us)."""
    conv = sig("conv2d", [([1, 56, 56, 64],), ([64, 64, 3, 3], "bfp8", "const")],
               ([1, 56, 56, 64],), padding=[1, 1])
    point = sig("conv2d", [([1, 56, 56, 64],), ([64, 64, 1, 1], "bfp8", "const")],
                ([1, 56, 56, 64],))
    h = sharded("height_sharded", 7, 7)
    c3 = build_candidate(conv, h, {"act_block_h_override": 0}, WH)
    c1 = build_candidate(point, h, {"act_block_h_override": 0}, WH)
    halo = FIXED + (2 * 58 + 2) * 64 * 2 / 32_000
    assert c3.fixed_us == pytest.approx(FIXED + halo)
    assert c1.fixed_us == pytest.approx(FIXED)


def test_the_halo_follows_stride_grid_and_the_matmul_path():
    """A 1x1 conv with stride 2 is no plain matmul in TT-NN: it runs the halo op, which has
    no overlap to fetch (0 rows, 0 pixels); a width-sharded 3x3 conv holds all pixels on
    every core and fetches nothing either. A 3x3 stride-2 max-pool block-sharded on 7x2
    fetches (3 - 1) - (2 - 1) = 1 padded row of 112 + 2 pixels and 1 pixel, of the 32
    channels of its grid column."""
    down = sig("conv2d", [([1, 56, 56, 64],), ([128, 64, 1, 1], "bfp8", "const")],
               ([1, 28, 28, 128],), stride=[2, 2])
    c = build_candidate(down, sharded("height_sharded", 1, 25), {"act_block_h_override": 0}, WH)
    assert c.fixed_us == pytest.approx(2 * FIXED)
    conv = sig("conv2d", [([1, 56, 56, 64],), ([64, 64, 3, 3], "bfp8", "const")],
               ([1, 56, 56, 64],), padding=[1, 1])
    wide = build_candidate(conv, sharded("width_sharded", 1, 2), {"act_block_h_override": 0}, WH)
    assert wide.fixed_us == pytest.approx(2 * FIXED)
    pool = sig("max_pool2d", [([1, 112, 112, 64],)], ([1, 56, 56, 64],), kernel_size=[3, 3],
               stride=[2, 2], padding=[1, 1])
    p = build_candidate(pool, sharded("block_sharded", 7, 2), {}, WH)
    assert p.fixed_us == pytest.approx(2 * FIXED + (114 + 1) * 32 * 2 / 32_000)


def test_a_depthwise_conv_computes_like_a_dense_one_as_ttnn_runs_it():
    """TT-NN expands a grouped conv's weights with zeros to every input channel (tt-metal
    #25523): a 3x3 depthwise conv over 96 channels multiplies K = 96 x 9 = 864 (27 tiles),
    not 9. Height-sharded on 25 cores (one tile row of 3 output tiles each, bf16 at HiFi4:
    64 cycles a tile at 0.92, plus a tenth for the one-tile activation block); the whole K
    is held: 2 x 1 x 27 activation + 27 x 3 weight + 2 tiles. Its halo carries all 96
    channels: (2 x 30 + 2) pixels x 96 x 2 B."""
    dw = sig("conv2d", [([1, 28, 28, 96],), ([96, 1, 3, 3], "bf16", "const")],
             ([1, 28, 28, 96],), padding=[1, 1], groups=96)
    h = sharded("height_sharded", 1, 25)  # 784 output rows: 25 tile rows, one per core
    c = build_candidate(dw, h, {"act_block_h_override": 0}, WH)
    assert c.program["weights_k_tiles"] == 27
    assert c.compute_us == pytest.approx(3 * 27 * 64 / 0.92 * 1.1 / 1000)
    assert c.cb_bytes_per_core == (2 * 27 + 27 * 3 + 2) * 2048
    assert c.fixed_us == pytest.approx(2 * FIXED + (2 * 30 + 2) * 96 * 2 / 32_000)


def test_a_wide_conv_streams_k_in_blocks_over_its_grid_columns():
    """MobileNetV2's last depthwise conv: 960 channels on 7 x 7 (2 x 30 output tiles), K =
    960 x 9 (270 tiles). Height-sharded, a core would hold all 270 K tiles of weights for
    30 output columns (a 17.7 MB scratch): no such configuration. Block-sharded on 2 x 6 the
    input channels are split over the 6 columns: K blocks of 45 tiles, double-buffered, for
    5 output columns, 2 x 45 + 2 x 45 x 5 + 2 tiles, and 6 K-block hand-overs of 400 cycles.
    Its weights are read as TT-NN prepares them, 270 x 30 bf16 tiles (16.6 MB) on 12
    cores, all 12 banks. A DRAM output runs on the fitting widest sharding with the most
    cores, width 1 x 30: K in 30 blocks of 9 tiles, one output column, the 2-tile-row
    activation block."""
    dw = sig("conv2d", [([1, 7, 7, 960],), ([960, 1, 3, 3], "bf16", "const")],
             ([1, 7, 7, 960],), padding=[1, 1], groups=960)
    found = candidates(dw, WH, 4096)
    assert not any(c.output.layout == "height_sharded" for c in found)
    block = build_candidate(dw, sharded("block_sharded", 2, 6), {"act_block_h_override": 0}, WH)
    assert block.cb_bytes_per_core == (2 * 45 + 2 * 45 * 5 + 2) * 2048
    assert block.compute_us == pytest.approx((5 * 270 * 64 / 0.92 * 1.1 + 6 * 400) / 1000)
    assert block.program["k_blocks"] == 6
    assert block.accepts[1] == {DRAM: pytest.approx(270 * 30 * 2048 / WH_DRAM)}
    dram = next(c for c in found if c.output == DRAM)
    assert dram.cb_bytes_per_core == (2 * 2 * 9 + 2 * 9 * 1 + 2) * 2048
    assert dram.compute_us == pytest.approx((2 * 270 * 64 / 0.92 * 1.05 + 30 * 400) / 1000)
    assert dram.program["k_blocks"] == 30


def test_candidate_cap_keeps_interleaved_first_and_can_be_raised():
    big = sig("matmul", [([1024, 1024],), ([1024, 1024],)], ([1024, 1024],))
    few = candidates(big, WH)
    many = candidates(big, WH, 4096)
    assert len(few) == 64 < len(many)
    assert few[0].output == DRAM and not few[1].output == L1_INTERLEAVED  # matmul: no L1i
    assert [c.id for c in few] == [c.id for c in many[:64]]


def test_every_op_of_every_example_has_a_dram_configuration():
    from tests.layout_fixtures import EXAMPLES, load
    for path in EXAMPLES:
        p = analyze(parse_graph(load(path)), WH)
        for info in p.ops.values():
            assert any(c.output == DRAM for c in info.candidates), info.name


# ----------------------------------------------------------------------- cost model

def test_dram_noc_and_l1_times_by_hand():
    assert cost.dram_us(WH, 184_320, 64) == pytest.approx(1.0)  # 0.64 x 288,000 B/us
    assert cost.dram_us(WH, 184_320, 12) == pytest.approx(1.0)  # one core per bank
    assert cost.dram_us(WH, 15_360, 1) == pytest.approx(1.0)  # one core: one bank's share
    assert cost.dram_us(WH, 61_440, 4) == pytest.approx(1.0)
    assert cost.dram_us(BH, 409_600, 130) == pytest.approx(1.0)  # 0.8 x 512,000 B/us
    assert cost.dram_us(BH, 51_200, 1) == pytest.approx(1.0)  # over 8 banks
    assert cost.dram_sharded_us(WH, 247_680) == pytest.approx(1.0)  # 0.86 x 288,000 B/us
    assert cost.dram_sharded_us(BH, 460_800) == pytest.approx(1.0)  # 0.90 x 512,000 B/us
    assert cost.noc_us(WH, 32_000) == pytest.approx(1.0)  # 32 B/cycle at 1 GHz
    assert cost.l1_us(BH, 128 * 1350) == pytest.approx(1.0)  # 128 B/cycle at 1.35 GHz


def test_binary_add_in_dram_by_hand():
    c = build_candidate(ADD, DRAM, {}, WH)
    nbytes = 12 * 24 * 2048
    read = nbytes / WH_DRAM
    assert c.compute_us == pytest.approx(math.ceil(288 / 64) * 32 / 1000)
    assert c.latency_us([DRAM, DRAM]) == pytest.approx(3 * read + FIXED)
    sharded_add = build_candidate(ADD, H12, {}, WH)
    local = 24 * 2048 / 64_000  # one shard at 64 B/cycle
    assert sharded_add.latency_us([H12, H12]) == pytest.approx(
        max(24 * 32 / 1000, 3 * local) + FIXED)


def test_dram_reads_are_limited_by_the_cores_reading():
    """An op on 4 cores reads a DRAM operand at 4 banks' share (4 x 15,360 B/us on a
    Wormhole), on 12 or more at all of the interleaved rate; a DRAM output is written by
    every core."""
    nbytes = 12 * 24 * 2048
    h4 = sharded("height_sharded", 1, 4)
    assert build_candidate(ADD, h4, {}, WH).accepts[0][DRAM] == pytest.approx(
        nbytes / (4 * WH_BANK))
    assert build_candidate(ADD, H12, {}, WH).accepts[0][DRAM] == pytest.approx(nbytes / WH_DRAM)
    assert build_candidate(ADD, DRAM, {}, WH).write_us == pytest.approx(nbytes / WH_DRAM)
    # an interleaved output of 4 tiles runs on 4 cores: 4 banks' share for its DRAM reads
    small = sig("add", [([64, 64],), ([64, 64],)], ([64, 64],))
    assert build_candidate(small, DRAM, {}, WH).accepts[0][DRAM] == pytest.approx(
        4 * 2048 / (4 * WH_BANK))
    # and its spill from L1-interleaved is written by those 4 cores (one tile each)
    assert cost.copy_us(WH, Geometry.of([64, 64], "bf16"), L1_INTERLEAVED, DRAM) == (
        pytest.approx(FIXED + 2048 / 32_000 + 4 * 2048 / (4 * WH_BANK)))


def test_matmul_compute_by_hand():
    c = build_candidate(MATMUL, B48, {"in0_block_w": 2}, WH)
    tile_mms = 3 * 3 * 24  # per_core_M x per_core_N x Kt
    # HiFi4 for bf16 operands: 64 cycles a tile, slower than unpacking two bf16 tiles
    # (4096 B at 96 B/cycle = 42.7); at 92% utilisation; 24 / 2 = 12 K blocks of 400 cycles
    cycles = tile_mms * 64 / 0.92 + 12 * 400
    assert c.compute_us == pytest.approx(cycles / 1000)
    assert c.cb_bytes_per_core == (2 * 3 * 2 + 2 * 2 * 3) * 2048


def test_a_custom_device_without_the_fitted_fields_is_priced_as_before():
    """No matmul_utilization, k_block_sync_cycles, unpack rate or op latency: 0.7, a 0.1 /
    in0_block_w share, no unpacking bound and host dispatch only, as before they existed."""
    fields = WH.model_dump(exclude={"matmul_utilization", "k_block_sync_cycles",
                                    "unpack_bytes_per_cycle", "op_latency_us",
                                    "dram_interleaved_efficiency", "dram_sharded_efficiency"})
    old = DeviceSpec.model_validate({**fields, "name": "old"})
    c = build_candidate(MATMUL, B48, {"in0_block_w": 2}, old)
    assert c.compute_us == pytest.approx(216 * 64 / 0.7 * (1 + 0.1 / 2) / 1000)
    assert c.fixed_us == 2.0
    assert c.accepts[1][DRAM] == pytest.approx(768 * 768 * 2 / 288_000)  # the whole 288 GB/s
    assert not any(dict(k.knobs).get("dram_sharded") for k in candidates(DECODE, old))


# A decode projection: one tile row of activations, a 4096 x 4096 bfp8 weight (17,825,792
# B), the output width-sharded over 8 cores (16 of its 128 tile columns each).
DECODE = sig("matmul", [([32, 4096],), ([4096, 4096], "bfp8", "const")], ([32, 4096],))
W8 = sharded("width_sharded", 1, 8)


def test_dram_sharded_matmul_by_hand():
    """The weight streams from its 12 banks at 0.86 x 288 GB/s, one compute core per bank
    (ceil(128 / 12) = 11 output tile columns each), in0 only from its width-sharded L1, in
    K blocks of its shard width (16 tiles on 8 cores: blocks of 8)."""
    ds = build_candidate(DECODE, W8, {"in0_block_w": 8, "dram_sharded": 1}, WH)
    assert ds.accepts[1] == {DRAM: pytest.approx(17_825_792 / 247_680)}
    assert list(ds.accepts[0]) == [W8]
    tile = (2048 + 1088) / 96 / 0.92  # unpacking a bf16 and a bfp8 tile outruns HiFi2's 32
    compute = (1 * 11 * 128 * tile + 128 // 8 * 400) / 1000
    assert ds.compute_us == pytest.approx(compute)
    shard = 16 * 2048 / 64_000  # in0's and the output's shard in local L1
    assert ds.latency_us([W8, DRAM]) == pytest.approx(
        max(compute, shard + shard + 17_825_792 / 247_680) + FIXED)
    assert (ds.program["program"], ds.program["per_core_N"], ds.program["per_core_N_compute"],
            ds.program["in0_block_w"]) == ("dram_sharded", 16, 11, 8)
    # the 1-D multicast on the same 8 cores reads interleaved at 8 banks' share
    mcast = build_candidate(DECODE, W8, {"in0_block_w": 8}, WH)
    assert mcast.accepts[1][DRAM] == pytest.approx(17_825_792 / (8 * WH_BANK))
    assert mcast.latency_us([W8, DRAM]) > 1.9 * ds.latency_us([W8, DRAM])
    # over 64 cores (2 tile columns each) the multicast reads at the whole interleaved rate;
    # the DRAM-sharded matmul's K blocks shrink to the 2-tile in0 shard: 64 hand-overs
    w64 = sharded("width_sharded", 1, 64)
    shards = 2 * (2 * 2048 / 64_000)
    wide = build_candidate(DECODE, w64, {"in0_block_w": 8}, WH).latency_us([w64, DRAM])
    assert wide == pytest.approx(17_825_792 / WH_DRAM + shards + FIXED)
    wide_ds = build_candidate(DECODE, w64, {"in0_block_w": 2, "dram_sharded": 1}, WH)
    blocks_of_2 = (1 * 11 * 128 * tile + 64 * 400) / 1000
    assert wide_ds.latency_us([w64, DRAM]) == pytest.approx(
        max(blocks_of_2, 17_825_792 / 247_680 + shards) + FIXED)


def test_dram_sharded_matmul_is_offered_only_where_ttnn_runs_it():
    def offered(s: OpSig, out: MemConfig, device: DeviceSpec = WH) -> bool:
        return any(dict(c.knobs).get("dram_sharded") for c in candidates(s, device, 4096)
                   if c.output == out)
    assert offered(DECODE, W8)
    assert not offered(DECODE, sharded("height_sharded", 1, 1))  # the output width-sharded
    assert not offered(DECODE, DRAM)
    prefill = sig("matmul", [([64, 4096],), ([4096, 4096], "bfp8", "const")], ([64, 4096],))
    assert not offered(prefill, W8)  # two tile rows: TT-NN's decode matmul takes one
    activation_rhs = sig("matmul", [([32, 4096],), ([4096, 4096], "bfp8")], ([32, 4096],))
    assert not offered(activation_rhs, W8)  # a weight, prepared at load time
    assert rule_of(build_candidate(activation_rhs, W8, {"in0_block_w": 8, "dram_sharded": 1},
                                   WH)) == "knobs.unknown"
    no_banks = WH.model_copy(update={"dram_sharded_efficiency": None})
    assert not offered(DECODE, W8, no_banks)


def test_fidelity_follows_the_weight_dtype_unless_unpacking_is_slower():
    lofi = sig("matmul", [([384, 768],), ([768, 768], "bfp4", "const")], ([384, 768],))
    hifi2 = sig("matmul", [([384, 768],), ([768, 768], "bfp8", "const")], ([384, 768],))
    a = build_candidate(lofi, B48, {"in0_block_w": 2}, WH)
    b = build_candidate(hifi2, B48, {"in0_block_w": 2}, WH)
    # LoFi (16 cycles) and HiFi2 (32) are both outrun by unpacking a bf16 tile with a
    # bfp4 (2048 + 576 B) or bfp8 (2048 + 1088 B) tile at 96 B/cycle on a Wormhole
    assert a.compute_us == pytest.approx((216 * 2624 / 96 / 0.92 + 12 * 400) / 1000)
    assert b.compute_us == pytest.approx((216 * 3136 / 96 / 0.92 + 12 * 400) / 1000)
    # a Blackhole unpacks 128 B/cycle: a bfp8 weight is then HiFi2-bound (3136 / 128 < 32)
    bh = build_candidate(hifi2, B48, {"in0_block_w": 2}, BH)
    assert bh.compute_us == pytest.approx((216 * 32 / 0.92 + 12 * 400) / 1350)


def test_reshard_cost_by_hand():
    p = analyze(parse_graph(tiny()), WH)
    nbytes = 4 * 8 * 2048
    spill = p.copy_us("h", sharded("height_sharded", 1, 4), DRAM)
    # four cores write DRAM: four banks' share of the interleaved rate
    assert spill == pytest.approx(FIXED + (nbytes / 4) / 32_000 + nbytes / (4 * WH_BANK))
    reload = p.copy_us("h", DRAM, L1_INTERLEAVED)  # every core reads: the whole rate
    assert reload == pytest.approx(FIXED + nbytes / WH_DRAM + 1 * 2048 / 32_000)
    reshard = p.copy_us("h", sharded("height_sharded", 1, 4), sharded("width_sharded", 1, 8))
    assert reshard == pytest.approx(FIXED + (nbytes / 4) / 32_000 + (nbytes / 8) / 32_000)


def test_measured_costs_replace_the_model_per_entry():
    g = tiny()
    g["measured"] = {
        "ops": [{"op": "act", "config": "l1:height_sharded:1x4", "latency_us": 0.5}],
        "reshards": [{"tensor": "h", "from": "dram:interleaved", "to": "l1:height_sharded:1x4",
                      "latency_us": 7.0}]}
    p = analyze(parse_graph(g), WH)
    act = p.candidate("act", "l1:height_sharded:1x4")
    assert act.latency_us([DRAM]) == 0.5
    assert p.copy_us("h", DRAM, sharded("height_sharded", 1, 4)) == 7.0
    assert p.copy_us("h", DRAM, sharded("height_sharded", 1, 2)) != 7.0


def test_a_measured_config_that_is_illegal_is_rejected():
    from models.errors import InputValidationError
    g = tiny()
    g["measured"] = {"ops": [{"op": "fc", "config": "l1:interleaved", "latency_us": 1.0}]}
    with pytest.raises(InputValidationError) as info:
        analyze(parse_graph(g), WH)
    issue = info.value.issues[0]
    assert issue.rule == "measured.config_illegal" and issue.path == "$.measured.ops[0].config"
    assert "matmul.output_l1_interleaved" in issue.msg


def test_identical_ops_share_one_candidate_table():
    g = tiny()
    g["tensors"].append(tensor("y2", [1, 128, 256]))
    g["ops"].append(op("act2", "relu", ["h"], ["y2"]))
    p = analyze(parse_graph(g), WH)
    assert p.ops["act"].candidates == p.ops["act2"].candidates
