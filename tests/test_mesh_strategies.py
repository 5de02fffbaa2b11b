"""Parallel strategies by op type, checked by hand on small shapes; and the one-chip op
library's streamed norms, which wide models (a 70B layer's 8,192-wide rows) need on every
chip."""

from __future__ import annotations

from typing import Any

import pytest

from models.device import PRESETS
from models.layout import OpDecl
from models.layout_ops import attrs_model
from solver.layout import cost
from solver.layout.memory import DRAM, Geometry
from solver.layout.ops import FAMILIES, ROW_BLOCK_TILES, OperandSig, OpSig, candidates
from solver.mesh.strategies import axis_choices, op_strategies


def choices(op_type: str, shapes: list[list[int]], out: list[int], chips: int = 2,
            **attrs: Any) -> dict[str, tuple[tuple[str, ...], str]]:
    op = OpDecl(name="o", type=op_type, inputs=[f"i{j}" for j in range(len(shapes))],
                outputs=["y"], attrs=attrs)
    return {c.name: (c.inputs, c.output) for c in axis_choices(op, shapes, out, chips)}


def test_a_linear_splits_rows_columns_or_k() -> None:
    found = choices("linear", [[1, 32, 4096], [4096, 8192]], [1, 32, 8192])
    assert found == {"replicated": (("R", "R"), "R"), "rows": (("S1", "R"), "S1"),
                     "column": (("R", "S1"), "S2"), "row": (("S2", "S0"), "P")}
    # a batch of one does not split; an odd N has no column split
    odd = choices("linear", [[1, 32, 4096], [4096, 1001]], [1, 32, 1001])
    assert "column" not in odd and "batch0" not in odd


def test_attention_matmuls_split_by_heads_with_both_operands() -> None:
    found = choices("matmul", [[1, 8, 32, 64], [1, 8, 64, 32]], [1, 8, 32, 32])
    assert found["batch1"] == (("S1", "S1"), "S1")
    assert "batch0" not in found


def test_a_reshape_splits_only_dims_that_start_at_the_same_flat_offset() -> None:
    """[1, 1, 1024] -> [1, 8, 1, 128]: the 1024 starts where the 8 heads do, so splitting it
    8 ways is splitting the heads; the 128 starts inside a head (no input dim maps to it)."""
    found = choices("reshape", [[1, 1, 1024]], [1, 8, 1, 128], chips=8)
    assert found == {"replicated": (("R",), "R"), "split1": (("S2",), "S1"),
                     "partial": (("P",), "P")}
    heads = choices("reshape", [[1, 32, 4096]], [1, 32, 32, 128], chips=4)
    assert heads["split1"] == (("S1",), "S1") and heads["split2"] == (("S2",), "S2")


def test_normalized_and_reduced_dims_never_split_but_sums_go_partial() -> None:
    assert "split2" not in choices("softmax", [[1, 8, 64]], [1, 8, 64], dim=-1)
    norm = choices("rmsnorm", [[1, 32, 64], [64]], [1, 32, 64])
    assert "split2" not in norm and norm["split1"] == (("S1", "R"), "S1")
    summed = choices("reduce_sum", [[1, 32, 64]], [1, 32, 1], dims=[2])
    assert summed["reduce2"] == (("S2",), "P") and summed["split1"] == (("S1",), "S1")
    assert "reduce2" not in choices("reduce_max", [[1, 32, 64]], [1, 32, 1], dims=[2])
    # a mean over a split dim would divide each chip's sum by its own count
    assert "reduce2" not in choices("reduce_mean", [[1, 32, 64]], [1, 32, 1], dims=[2])


def test_no_partial_sum_under_a_fused_activation_or_a_bias() -> None:
    """relu(p1) + relu(p2) is not relu(p1 + p2), and every chip would add the bias."""
    assert "row" not in choices("linear", [[1, 32, 256], [256, 256]], [1, 32, 256],
                                activation="relu")
    assert "row" not in choices("linear", [[1, 32, 256], [256, 256], [256]], [1, 32, 256])
    conv = choices("conv2d", [[2, 8, 8, 16], [32, 16, 3, 3]], [2, 8, 8, 32], padding=[1, 1],
                   activation="relu")
    assert "in_channels" not in conv and "out_channels" in conv


def test_broadcast_operands_stay_replicated_along_what_they_broadcast() -> None:
    found = choices("add", [[1, 32, 64], [64]], [1, 32, 64])
    assert found["split1"] == (("S1", "R"), "S1") and found["split2"] == (("S2", "S0"), "S2")
    assert found["partial"] == (("P", "P"), "P")
    assert "partial" not in choices("mul", [[1, 32, 64], [1, 32, 64]], [1, 32, 64])


def test_embedding_and_conv_choices() -> None:
    emb = choices("embedding", [[1, 32], [32000, 4096]], [1, 32, 4096])
    assert emb["vocabulary"] == (("R", "S0"), "P") and emb["hidden"] == (("R", "S1"), "S2")
    conv = choices("conv2d", [[2, 8, 8, 16], [32, 16, 3, 3]], [2, 8, 8, 32], padding=[1, 1])
    assert conv["batch0"] == (("S0", "R"), "S0")
    assert conv["out_channels"] == (("R", "S0"), "S3")
    assert conv["in_channels"] == (("S3", "S1"), "P")


def test_two_axes_combine_only_into_even_splits() -> None:
    op = OpDecl(name="o", type="relu", inputs=["x"], outputs=["y"])
    found = op_strategies(op, [[1, 32, 96]], [1, 32, 96], (2, 4))
    names = {s.name for s in found}
    assert ("split2", "split2") in names  # 96 / 8 = 12
    assert ("split1", "split2") in names
    odd = op_strategies(op, [[1, 32, 12]], [1, 32, 12], (2, 8))
    assert ("split2", "split2") not in {s.name for s in odd}  # 12 / 16 is not whole


def test_a_norm_too_wide_for_l1_streams_its_row_and_reads_it_per_pass() -> None:
    """An 8,192-wide rmsnorm row is 256 tiles: three whole-row buffers (1.5 MiB) do not fit
    a Wormhole core's 1.3 MB, so it runs in 8-tile blocks, reading its input twice."""
    chip = PRESETS["wormhole_n300"]
    attrs = attrs_model("rmsnorm").model_validate({})
    x, g = OperandSig((1, 32, 8192), "bf16"), OperandSig((8192,), "bf16", True)
    sig = OpSig.of("rmsnorm", attrs, [x, g], [OperandSig((1, 32, 8192), "bf16")])
    family = FAMILIES["rmsnorm"]
    assert family.streamed(sig, DRAM, chip)
    assert family.cb_tiles(sig, DRAM, {}, chip) == 3 * ROW_BLOCK_TILES + 2
    found = [c for c in candidates(sig, chip) if c.output == DRAM]
    assert found, "a DRAM fallback exists"
    cores = cost.working_cores(chip, sig.out, DRAM)
    once = cost.access_us(chip, Geometry.of([1, 32, 8192], "bf16"), DRAM, cores)
    assert found[0].accepts[0][DRAM] == pytest.approx(2 * once)
    narrow = OpSig.of("rmsnorm", attrs, [OperandSig((1, 32, 4096), "bf16"),
                                         OperandSig((4096,), "bf16", True)],
                      [OperandSig((1, 32, 4096), "bf16")])
    assert not family.streamed(narrow, DRAM, chip)
