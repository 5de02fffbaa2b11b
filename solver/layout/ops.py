"""The op library: what each op type may do with its memory, and what it costs.

For one op instance (an ``OpSig``: type, attributes, operand and output shapes) a
*family* answers four questions, each a pure function:

- which output memory configurations exist and which are legal (``output_rule``);
- which op-specific knobs exist for an output (matmul ``in0_block_w`` and
  ``dram_sharded``, conv2d ``act_block_h_override``);
- which memory configuration of each operand the op can read, and at what cost
  (``reads``: ``input_rule`` plus ``cost.access_us``);
- the circular-buffer (scratch) L1 and the compute time of a configuration.

``build_candidate`` turns an (output, knobs) pair into a ``Candidate`` or names the
rule that forbids it; ``candidates`` enumerates and caps them. The rules are the
public tt-mlir op rules of DESIGN.md 2.2 plus the simplifications listed in
docs/layout-format.md; every rule is a predicate that returns its id and a reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

from models.device import DeviceSpec
from models.layout_ops import (
    BINARY_TYPES,
    POOL_TYPES,
    REDUCE_TYPES,
    UNARY_TYPES,
    Attrs,
    normalize_dim,
)
from solver.layout import cost
from solver.layout.memory import (
    DRAM,
    L1_INTERLEAVED,
    TILE,
    Geometry,
    MemConfig,
    cores_of,
    sharded,
    sharded_configs,
)

DEFAULT_MAX_CONFIGS = 64
# Model assumption: each block of the conv activation height (and, on a device without
# ``k_block_sync_cycles``, each matmul K block) costs a synchronisation: 0.1 / block tiles
# of the compute time.
BLOCK_SYNC_OVERHEAD = 0.1
# Model assumption: vector-unit cycles per 32x32 output tile, for every elementwise type
# (and "reduce", per input tile of a reduction); no default, so a new elementwise type
# must state its own (``tests/test_op_registry.py``).
TRANSCENDENTAL = ("gelu", "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt",
                  "reciprocal")
SFPU_CYCLES = {"relu": 32, "neg": 32, "abs": 32, **{t: 32 for t in BINARY_TYPES},
               **{t: 96 for t in TRANSCENDENTAL},
               "softmax": 320, "layernorm": 256, "rmsnorm": 192, "reduce": 64}
# tt-metal's softmax and layernorm "large tensor" kernels (normalization/*/device/kernels/
# compute/*_large_tensor.cpp) stream a row too wide for L1 in blocks and read it once per
# pass: the max, the sum of exponentials, then the output (softmax); the mean, the variance,
# then the output (layernorm); the sum of squares, then the output (rmsnorm). Model
# assumption: blocks of 8 tiles.
ROW_PASSES = {"softmax": 3, "layernorm": 3, "rmsnorm": 2}
ROW_BLOCK_TILES = 8
ACCEPT_SHARDED_ALTERNATIVES = 4  # sharded inputs offered to ops whose output is interleaved


@dataclass(frozen=True)
class OperandSig:
    shape: tuple[int, ...]
    dtype: str
    constant: bool = False

    @cached_property
    def geom(self) -> Geometry:
        return Geometry.of(self.shape, self.dtype)


@dataclass(frozen=True)
class OpSig:
    """Everything about an op that its legal configurations and costs depend on."""

    type: str
    attrs_json: str
    inputs: tuple[OperandSig, ...]
    outputs: tuple[OperandSig, ...]
    attrs: Attrs = field(compare=False, hash=False, repr=False)

    @staticmethod
    def of(op_type: str, attrs: Attrs, inputs: list[OperandSig],
           outputs: list[OperandSig]) -> OpSig:
        return OpSig(op_type, json.dumps(attrs.model_dump(mode="json"), sort_keys=True),
                     tuple(inputs), tuple(outputs), attrs)

    @property
    def out(self) -> Geometry:
        return self.outputs[0].geom


@dataclass(frozen=True, eq=False)
class Candidate:
    """One legal configuration of one op, with everything a solver needs to price it.

    ``accepts[i]`` maps each memory configuration operand ``i`` may be read from to
    the time that read takes; the latency of the op is
    ``max(compute_us, write_us + sum of the operand read times) + fixed_us``,
    or ``measured_us`` when the user measured this configuration. ``fixed_us`` is host
    dispatch, the device's op latency and any helper op run first (a conv's halo).
    """

    id: str
    output: MemConfig
    knobs: tuple[tuple[str, int], ...]
    accepts: tuple[dict[MemConfig, float], ...]
    cb_bytes_per_core: int
    compute_us: float
    write_us: float
    fixed_us: float
    program: dict[str, int | str | bool] = field(default_factory=dict)
    measured_us: float | None = None

    def latency_us(self, reads: list[MemConfig] | tuple[MemConfig, ...]) -> float:
        if self.measured_us is not None:
            return self.measured_us
        memory = self.write_us + sum(acc[m] for acc, m in zip(self.accepts, reads, strict=True))
        return max(self.compute_us, memory) + self.fixed_us

    def cores(self, device_cores: int) -> int:
        return cores_of(self.output, device_cores)

    @property
    def in_tt_mlir(self) -> bool:
        """Whether tt-mlir, whose policies the baselines reproduce, can emit this
        configuration: it has no DRAM-sharded matmul (tt-mlir #617)."""
        return not dict(self.knobs).get("dram_sharded")


def config_id(output: MemConfig, knobs: dict[str, int]) -> str:
    return output.key + "".join(f"/{k}={v}" for k, v in sorted(knobs.items()))


def parse_config_id(text: str) -> tuple[MemConfig, dict[str, int]]:
    """The inverse of ``config_id``; raises ValueError on malformed text."""
    head, *knobs = text.split("/")
    parsed: dict[str, int] = {}
    for k in knobs:
        name, _, value = k.partition("=")
        if not value.isdigit():
            raise ValueError(f"knob '{k}' needs an integer value")
        parsed[name] = int(value)
    return MemConfig.parse(head), parsed


class Family:
    """Defaults shared by every op type; subclasses override what differs."""

    def output_options(self, sig: OpSig, device: DeviceSpec) -> list[MemConfig]:
        return [DRAM, L1_INTERLEAVED, *sharded_configs(sig.out, device.grid_rc)]

    def output_rule(self, sig: OpSig, out: MemConfig) -> str | None:
        return None

    def knob_options(self, sig: OpSig, out: MemConfig,
                     device: DeviceSpec) -> list[dict[str, int]]:
        return [{}]

    def input_options(self, sig: OpSig, out: MemConfig, i: int,
                      device: DeviceSpec) -> list[MemConfig]:
        derived = self.sharded_input(sig, out, i)
        return [DRAM, L1_INTERLEAVED] + ([derived] if derived else [])

    def stored_bytes(self, sig: OpSig, i: int) -> int:
        """Bytes operand ``i`` takes in DRAM as the op reads it: its tiles, unless the op
        prepares it otherwise (a conv's weights)."""
        return sig.inputs[i].geom.total_bytes

    def reads(self, sig: OpSig, out: MemConfig, knobs: dict[str, int], i: int,
              device: DeviceSpec) -> dict[MemConfig, float]:
        """The memory configurations operand ``i`` may be read from, with the read time."""
        cores = cost.working_cores(device, sig.out, out)
        return {m: cost.access_us(device, sig.inputs[i].geom, m, cores)
                for m in self.input_options(sig, out, i, device)
                if input_rule(sig, out, i, m) is None}

    def sharded_input(self, sig: OpSig, out: MemConfig, i: int) -> MemConfig | None:
        """The sharded configuration operand ``i`` must have to match a sharded output."""
        if out.grid is None or sig.inputs[i].geom.tile_shape != sig.out.tile_shape:
            return None
        return out

    def operand_rule(self, sig: OpSig, out: MemConfig, i: int, m: MemConfig) -> str | None:
        """Family rule for reading operand ``i`` from a sharded ``m``."""
        want = self.sharded_input(sig, out, i)
        if want is None:
            return (f"{sig.type}.sharded_input: operand {i} may be sharded only to match a "
                    f"sharded output of the same shape; read it interleaved")
        return None if m == want else (f"{sig.type}.shard_mismatch: a sharded operand {i} "
                                       f"must be {want.key}")

    def cb_tiles(self, sig: OpSig, out: MemConfig, knobs: dict[str, int],
                 device: DeviceSpec) -> int:
        """Circular-buffer tiles per core: double-buffered streaming of every operand."""
        return 2 * (len(sig.inputs) + 1)

    def compute_us(self, sig: OpSig, out: MemConfig, knobs: dict[str, int],
                   device: DeviceSpec) -> float:
        return 0.0

    def prologue_us(self, sig: OpSig, out: MemConfig, device: DeviceSpec) -> float:
        """Time of a helper op TT-NN runs before this one (none by default)."""
        return 0.0

    def program(self, sig: OpSig, out: MemConfig, knobs: dict[str, int],
                device: DeviceSpec) -> dict[str, int | str | bool]:
        return {}


def out_tiles_per_core(sig: OpSig, out: MemConfig, device: DeviceSpec) -> int:
    """Output tiles one core computes: its shard, or an even share of all tiles."""
    st = sig.out.shard_tiles(out)
    return -(-sig.out.tiles // device.cores) if st is None else st[0] * st[1]


def widest_height_sharding(geom: Geometry, device: DeviceSpec) -> MemConfig:
    """The height sharding over the most cores, which an interleaved conv uses internally."""
    return next(m for m in sharded_configs(geom, device.grid_rc) if m.layout == "height_sharded")


def window_grid(sig: OpSig, out: MemConfig, device: DeviceSpec) -> MemConfig:
    """The grid a sliding-window op (conv2d, pooling) runs on: its output's sharding, or
    TT-NN's internal height sharding over the widest grid when the output is not sharded."""
    return out if out.is_sharded else widest_height_sharding(sig.out, device)


def halo_us(sig: OpSig, grid: MemConfig, kernel: tuple[int, int], stride: tuple[int, int],
            dilation: tuple[int, int], padding: tuple[int, int], device: DeviceSpec) -> float:
    """The halo op TT-NN runs before a sliding window (tt-metal tech_reports/CNNs/ttcnn.md):
    it builds each core's fully local input shard, fetching from the neighbouring core
    along N*H*W the input its windows overlap, ``(kh - 1) * dh - (sh - 1)`` padded input
    rows and ``(kw - 1) * dw - (sw - 1)`` pixels, of the channels the core holds. A
    width-sharded grid (every core holds all of N*H*W) or a single core along it fetches
    nothing. A separate op, so it pays the fixed cost too."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    _, _, width, channels = sig.inputs[0].shape
    rows, cols = grid.grid or (1, 1)
    along_nhw, channel_split = {"height_sharded": (rows * cols, 1),
                                "block_sharded": (rows, cols)}.get(grid.layout, (1, 1))
    pixels = (max(0, (kh - 1) * dh - (sh - 1)) * (width + 2 * padding[1])
              + max(0, (kw - 1) * dw - (sw - 1)))
    element_bytes = sig.inputs[0].geom.tile_bytes / (TILE * TILE)
    nbytes = pixels * -(-channels // channel_split) * element_bytes if along_nhw > 1 else 0
    return cost.fixed_us(device) + cost.noc_us(device, nbytes)


def fidelity(sig: OpSig) -> str:
    """The op's math fidelity: as given, else from the lowest-precision operand."""
    if sig.attrs.math_fidelity:
        return sig.attrs.math_fidelity
    dtypes = {o.dtype for o in sig.inputs}
    return "LoFi" if "bfp4" in dtypes else "HiFi2" if "bfp8" in dtypes else "HiFi4"


def operand_tile_bytes(sig: OpSig) -> int:
    """Bytes of one tile of each of the two matmul operands (activation and weight)."""
    return sig.inputs[0].geom.tile_bytes + sig.inputs[1].geom.tile_bytes


def sfpu_cycles(op_type: str) -> int:
    return SFPU_CYCLES[op_type]


class Eltwise(Family):
    """Unary and binary elementwise ops, softmax, layernorm and rmsnorm."""

    def output_rule(self, sig: OpSig, out: MemConfig) -> str | None:
        if sig.type == "softmax" and out.is_sharded:
            last = normalize_dim(sig.attrs.dim, len(sig.outputs[0].shape)) == len(
                sig.outputs[0].shape) - 1
            if not last or out.layout != "height_sharded":
                return ("softmax.sharding: a sharded softmax must run over the last dim "
                        "with height-sharded rows")
        if sig.type in ("layernorm", "rmsnorm") and out.layout == "width_sharded":
            return "norm.width_sharded: a normalized row cannot be split by width sharding"
        return None

    def operand_rule(self, sig: OpSig, out: MemConfig, i: int, m: MemConfig) -> str | None:
        if out.grid is None:
            return ("eltwise.sharded_input_needs_sharded_output: with an interleaved output "
                    "every operand is read interleaved")
        if sig.inputs[i].geom.tile_shape != sig.out.tile_shape:
            return ("eltwise.broadcast_operand: a broadcast operand is read interleaved, "
                    "never sharded")
        if m.grid[0] * m.grid[1] > out.grid[0] * out.grid[1]:  # type: ignore[index]
            return (f"binary.core_shrink: operand {i} on {m.key} spans more cores than the "
                    f"output {out.key}; ops that shrink the core count are rejected")
        return super().operand_rule(sig, out, i, m)

    def streamed(self, sig: OpSig, out: MemConfig, device: DeviceSpec) -> bool:
        """An interleaved softmax or norm whose whole row of circular buffers would not fit
        L1 runs TT-NN's large-tensor kernels: the row in blocks, read once per pass."""
        if sig.type not in ROW_PASSES or out.grid is not None:
            return False
        whole = 3 * sig.out.wt + 2 * (len(sig.inputs) - 1)
        return whole * sig.out.tile_bytes > device.usable_l1_bytes

    def cb_tiles(self, sig, out, knobs, device) -> int:
        if sig.type in ROW_PASSES:
            st = sig.out.shard_tiles(out)
            row = st[1] if st else sig.out.wt
            if self.streamed(sig, out, device):
                row = ROW_BLOCK_TILES
            return 3 * row + 2 * (len(sig.inputs) - 1)
        return super().cb_tiles(sig, out, knobs, device)

    def reads(self, sig, out, knobs, i, device) -> dict[MemConfig, float]:
        found = super().reads(sig, out, knobs, i, device)
        if i == 0 and self.streamed(sig, out, device):
            return {m: ROW_PASSES[sig.type] * t for m, t in found.items()}
        return found

    def compute_us(self, sig, out, knobs, device) -> float:
        return cost.cycles_us(device, out_tiles_per_core(sig, out, device) * sfpu_cycles(sig.type))


class ShardedLikeOutput(Family):
    """Ops whose activation (operand 0) is sharded on the output's layout and grid, with its
    own shard shape: matmul in0, conv2d and pooling input."""

    def sharded_input(self, sig, out, i) -> MemConfig | None:
        if i != 0 or out.grid is None:
            return None
        want = sharded(out.layout, *out.grid)
        return want if sig.inputs[0].geom.fits_grid(want) else None


class Matmul(ShardedLikeOutput):
    """matmul and linear (optional bias), with the program configs tt-mlir derives."""

    def output_rule(self, sig: OpSig, out: MemConfig) -> str | None:
        if out == L1_INTERLEAVED:
            return "matmul.output_l1_interleaved: a matmul output is never L1-interleaved"
        if out.is_sharded and len(sig.inputs[1].shape) > 2 and out.layout != "height_sharded":
            return ("matmul.batched_rhs_height_only: a matmul with a batched RHS shards its "
                    "output by height only")
        return None

    def operand_rule(self, sig, out, i, m) -> str | None:
        if i == 1:
            return "matmul.rhs_sharded: the RHS of a matmul is never sharded"
        if i == 2:
            return "matmul.bias_sharded: the bias of a linear is read interleaved"
        return super().operand_rule(sig, out, i, m)

    def dims(self, sig: OpSig) -> tuple[int, int, int]:
        """(Mt, Nt, Kt) with M collapsed over the batch dims."""
        return sig.out.ht, sig.out.wt, sig.inputs[0].geom.wt

    def per_core(self, sig: OpSig, out: MemConfig, device: DeviceSpec,
                 knobs: dict[str, int]) -> tuple[int, int]:
        mt, nt, _ = self.dims(sig)
        if knobs.get("dram_sharded"):
            return mt, -(-nt // device.dram_banks)
        rows, cols = out.grid or device.grid_rc
        if out.layout == "height_sharded":
            return -(-mt // (rows * cols)), nt
        if out.layout == "width_sharded":
            return mt, -(-nt // (rows * cols))
        return -(-mt // rows), -(-nt // cols)

    def default_block_w(self, sig: OpSig, out: MemConfig) -> int:
        """tt-mlir MatmulProgramConfig: full K for height-sharded, small blocks otherwise."""
        mt, nt, kt = self.dims(sig)
        if out.layout == "height_sharded":
            return kt
        if out.layout == "width_sharded" and nt <= 128:
            return next(d for d in (8, 4, 2, 1) if kt % d == 0)
        return 2 if kt % 2 == 0 else 1

    def knob_options(self, sig, out, device) -> list[dict[str, int]]:
        default = self.default_block_w(sig, out)
        lean = 2 if default % 2 == 0 and default > 2 else default
        options = [{"in0_block_w": w} for w in dict.fromkeys((default, lean))]
        if self.dram_sharded_offered(sig, out, device):
            shard_k = sig.inputs[0].geom.shard_tiles(out)[1]  # type: ignore[index]
            block = next(d for d in range(min(shard_k, 8), 0, -1) if shard_k % d == 0)
            options.append({"in0_block_w": block, "dram_sharded": 1})
        return options

    @staticmethod
    def dram_sharded_offered(sig: OpSig, out: MemConfig, device: DeviceSpec) -> bool:
        """TT-NN's DRAM-sharded matmul (``MatmulMultiCoreReuseMultiCastDRAMShardedProgram
        Config``, tech_reports/LLMs/llms.md 4.3.2.2), for decode: one tile row of in0
        width-sharded in L1 (its K blocks the largest divisor up to 8 of its shard width, as
        TT-NN's model configs pick), the output width-sharded, in1 a 2-D weight
        width-sharded over the DRAM banks at load time, one compute core next to each
        bank."""
        rhs = sig.inputs[1]
        return (device.dram_sharded_efficiency is not None and out.layout == "width_sharded"
                and sig.out.ht == 1 and rhs.constant and len(rhs.shape) == 2
                and sig.inputs[0].geom.fits_grid(out))

    def reads(self, sig, out, knobs, i, device) -> dict[MemConfig, float]:
        """With ``dram_sharded`` in1 streams from its banks at the DRAM-sharded rate and in0
        must be the width-sharded activation."""
        found = super().reads(sig, out, knobs, i, device)
        if not knobs.get("dram_sharded") or i == 2:
            return found
        if i == 1:
            return {DRAM: cost.dram_sharded_us(device, sig.inputs[1].geom.total_bytes)}
        return {m: t for m, t in found.items() if m.is_sharded}

    def block_w(self, sig: OpSig, out: MemConfig, knobs: dict[str, int]) -> int:
        return knobs.get("in0_block_w", self.default_block_w(sig, out))

    def cb_tiles(self, sig, out, knobs, device) -> int:
        pm, pn = self.per_core(sig, out, device, knobs)
        w = self.block_w(sig, out, knobs)
        staged_out = 0 if out.is_sharded else pm * pn
        return 2 * pm * w + 2 * w * pn + staged_out + (2 * pn if len(sig.inputs) == 3 else 0)

    def compute_us(self, sig, out, knobs, device) -> float:
        pm, pn = self.per_core(sig, out, device, knobs)
        kt = self.dims(sig)[2]
        cycles = cost.matmul_cycles(device, pm * pn * kt, fidelity(sig), operand_tile_bytes(sig))
        w = self.block_w(sig, out, knobs)
        if device.k_block_sync_cycles is None:
            cycles *= 1 + BLOCK_SYNC_OVERHEAD / w
        else:
            cycles += -(-kt // w) * device.k_block_sync_cycles
        if sig.attrs.activation:
            cycles += pm * pn * sfpu_cycles(sig.attrs.activation)
        return cost.cycles_us(device, cycles)

    def program(self, sig, out, knobs, device) -> dict[str, int | str | bool]:
        pm, pn = self.per_core(sig, out, device, knobs)
        kinds = {"height_sharded": "1d_mcast_in1", "width_sharded": "1d_mcast_in0",
                 "block_sharded": "2d_mcast"}
        kind = kinds.get(out.layout, "interleaved") if out.is_sharded else "interleaved"
        sub_w = next(d for d in range(min(pn, 8), 0, -1) if pn % d == 0)
        program: dict[str, int | str | bool] = {
            "program": kind, "per_core_M": pm, "per_core_N": pn,
            "in0_block_w": self.block_w(sig, out, knobs), "out_subblock_h": 1,
            "out_subblock_w": sub_w}
        if knobs.get("dram_sharded"):  # per_core_N is the output shard; TT-NN derives the rest
            program.update(program="dram_sharded", per_core_N_compute=pn,
                           per_core_N=sig.out.shard_tiles(out)[1])  # type: ignore[index]
        return program


class Conv2d(ShardedLikeOutput):
    """conv2d as TT-NN runs it: an implicit matmul [N*Ho*Wo, Cin*kh*kw] x [.., Cout]."""

    ACT_BLOCK_H = (0, 64, 32)
    INTERNAL_LAYOUTS = ("height_sharded", "block_sharded", "width_sharded")

    def output_rule(self, sig, out) -> str | None:
        if out == L1_INTERLEAVED:
            return "conv2d.output_l1_interleaved: a conv2d output is sharded or in DRAM"
        return None

    def operand_rule(self, sig, out, i, m) -> str | None:
        if i > 0:
            return "conv2d.weight_sharded: conv2d weights and bias are read interleaved"
        return super().operand_rule(sig, out, i, m)

    def kt(self, sig: OpSig) -> int:
        """K tiles of the implicit matmul: every input channel x the window. TT-NN expands
        a grouped conv's weights with zeros to all input channels (tt-metal #25523, open),
        so a depthwise conv computes and holds its weights like a dense one."""
        _, _, kh, kw = sig.inputs[1].shape
        return max(1, -(-(sig.inputs[0].shape[3] * kh * kw) // TILE))

    def run_grid(self, sig: OpSig, out: MemConfig, device: DeviceSpec) -> MemConfig:
        """The grid the conv runs on: its output's sharding; for a DRAM output TT-NN shards
        internally, here over whichever of the widest height, block and width shardings
        whose scratch fits L1 has the most cores, height first on a tie (model assumption:
        TT-NN's own choice is a heuristic not reproduced)."""
        if out.is_sharded:
            return out
        first: dict[str, MemConfig] = {}
        for m in sharded_configs(sig.out, device.grid_rc):  # widest first
            first.setdefault(m.layout, m)
        widest = [first[layout] for layout in self.INTERNAL_LAYOUTS if layout in first]
        fitting = [m for m in widest if self.fits(sig, m, device)]
        return max(fitting, key=lambda m: cores_of(m, device.cores)) if fitting else widest[0]

    def fits(self, sig: OpSig, grid: MemConfig, device: DeviceSpec) -> bool:
        """Some activation block leaves the scratch and the output shard within L1."""
        held = sig.out.bytes_per_core(grid, device.cores)
        return any(self.cb_tiles(sig, grid, knobs, device) * sig.out.tile_bytes + held
                   <= device.usable_l1_bytes for knobs in self.knob_options(sig, grid, device))

    def k_blocks(self, sig: OpSig, grid: MemConfig) -> int:
        """K blocks a core streams: a block-sharded conv splits the input channels over its
        grid columns, each core's block multicast along its row, a width-sharded one over
        every core (tt-metal tech_reports/CNNs/ttcnn.md); a height-sharded one holds all of
        K."""
        rows, cols = grid.grid or (1, 1)
        n = {"block_sharded": cols, "width_sharded": rows * cols}.get(grid.layout, 1)
        return min(n, self.kt(sig))

    def stored_bytes(self, sig, i) -> int:
        """The weights as TT-NN prepares them: a [K, Cout] matrix of whole tiles over every
        input channel (zeros for the other groups), not the [Cout, C/groups, kh, kw] tensor
        the graph declares (whose trailing kw would be padded to a whole tile)."""
        if i != 1:
            return super().stored_bytes(sig, i)
        return self.kt(sig) * sig.out.wt * sig.inputs[1].geom.tile_bytes

    def reads(self, sig, out, knobs, i, device) -> dict[MemConfig, float]:
        found = super().reads(sig, out, knobs, i, device)
        if i != 1:
            return found
        cores = cost.working_cores(device, sig.out, out)
        return {DRAM: cost.dram_us(device, self.stored_bytes(sig, 1), cores)}

    def knob_options(self, sig, out, device) -> list[dict[str, int]]:
        grid = self.run_grid(sig, out, device)
        if grid.layout == "width_sharded":
            return [{"act_block_h_override": 0}]
        rows = sig.out.shard_tiles(grid)[0]
        return [{"act_block_h_override": h} for h in self.ACT_BLOCK_H if h < rows * TILE]

    def act_block_tiles(self, sig, out, knobs, device) -> int:
        override = knobs.get("act_block_h_override", 0)
        return override // TILE if override else sig.out.shard_tiles(
            self.run_grid(sig, out, device))[0]

    def cb_tiles(self, sig, out, knobs, device) -> int:
        """The activation block over one K block, double-buffered, and the weights of one
        K block (double-buffered when K is streamed in several) for the core's output
        columns."""
        grid = self.run_grid(sig, out, device)
        blocks = self.k_blocks(sig, grid)
        kb = -(-self.kt(sig) // blocks)
        pn = sig.out.shard_tiles(grid)[1]
        act = self.act_block_tiles(sig, grid, knobs, device)
        return 2 * act * kb + (2 if blocks > 1 else 1) * kb * pn + 2

    def compute_us(self, sig, out, knobs, device) -> float:
        """The tile matmuls at the act-block share (``BLOCK_SYNC_OVERHEAD``), and where K is
        streamed each K block of each activation block handed over like a matmul's."""
        grid = self.run_grid(sig, out, device)
        tiles = out_tiles_per_core(sig, grid, device)
        cycles = cost.matmul_cycles(device, tiles * self.kt(sig), fidelity(sig),
                                    operand_tile_bytes(sig))
        act = self.act_block_tiles(sig, out, knobs, device)
        cycles *= 1 + BLOCK_SYNC_OVERHEAD / act
        blocks = self.k_blocks(sig, grid)
        if blocks > 1 and device.k_block_sync_cycles is not None:
            act_blocks = -(-sig.out.shard_tiles(grid)[0] // act)  # type: ignore[index]
            cycles += act_blocks * blocks * device.k_block_sync_cycles
        if sig.attrs.activation:
            cycles += tiles * sfpu_cycles(sig.attrs.activation)
        return cost.cycles_us(device, cycles)

    def prologue_us(self, sig, out, device) -> float:
        """The halo (``halo_us``), except where TT-NN runs the conv as a plain matmul: a
        1x1 window, stride 1, no padding, one group, not width-sharded."""
        w, a = sig.inputs[1].shape, sig.attrs
        grid = self.run_grid(sig, out, device)
        if (w[2], w[3], *a.stride, *a.padding, a.groups) == (1, 1, 1, 1, 0, 0, 1) and \
                grid.layout != "width_sharded":
            return 0.0
        return halo_us(sig, grid, (w[2], w[3]), tuple(a.stride), tuple(a.dilation),
                       tuple(a.padding), device)

    def program(self, sig, out, knobs, device) -> dict[str, int | str | bool]:
        return {"act_block_h_override": knobs.get("act_block_h_override", 0),
                "act_block_h_tiles": self.act_block_tiles(sig, out, knobs, device),
                "weights_k_tiles": self.kt(sig),
                "k_blocks": self.k_blocks(sig, self.run_grid(sig, out, device))}


class Pool(ShardedLikeOutput):
    """max_pool2d / avg_pool2d: the input is sharded like the output when sharded."""

    def window(self, sig: OpSig) -> int:
        return sig.attrs.kernel_size[0] * sig.attrs.kernel_size[1]

    def cb_tiles(self, sig, out, knobs, device) -> int:
        return 2 * self.window(sig) + 2

    def compute_us(self, sig, out, knobs, device) -> float:
        return cost.cycles_us(device, out_tiles_per_core(sig, out, device) * self.window(sig)
                              * sfpu_cycles("add"))

    def prologue_us(self, sig, out, device) -> float:
        a = sig.attrs
        return halo_us(sig, window_grid(sig, out, device), tuple(a.kernel_size),
                       tuple(a.stride or a.kernel_size), (1, 1), tuple(a.padding), device)


class Interleaved(Family):
    """Ops that only run interleaved: reductions, slice, embedding, opaque."""

    def output_rule(self, sig, out) -> str | None:
        if sig.type == "opaque" and out.is_l1:
            return "opaque.dram_only: an opaque op reads and writes DRAM only"
        if out.is_sharded:
            rule = {"slice": "slice.interleaved_only", "embedding": "embedding.output_sharded"}
            return (f"{rule.get(sig.type, sig.type.split('_')[0] + '.interleaved_only')}: "
                    f"{sig.type} output is never sharded")
        return None

    def input_options(self, sig, out, i, device) -> list[MemConfig]:
        return [DRAM] if sig.type == "opaque" else [DRAM, L1_INTERLEAVED]

    def operand_rule(self, sig, out, i, m) -> str | None:
        name = {"slice": "slice.interleaved_only", "embedding": "embedding.interleaved_input",
                "opaque": "opaque.dram_only"}.get(sig.type, "reduce.interleaved_only")
        return f"{name}: {sig.type} reads its operands interleaved"

    def compute_us(self, sig, out, knobs, device) -> float:
        if sig.type in REDUCE_TYPES:
            tiles = -(-sig.inputs[0].geom.tiles // device.cores)
            return cost.cycles_us(device, tiles * sfpu_cycles("reduce"))
        return 0.0

    def cb_tiles(self, sig, out, knobs, device) -> int:
        return 2 * sig.out.wt if sig.type == "embedding" else super().cb_tiles(sig, out, knobs,
                                                                                device)


class Concat(Family):
    """concat: inputs share one layout and grid; the concat dim decides which."""

    def output_rule(self, sig, out) -> str | None:
        if not out.is_sharded:
            return None
        rank = len(sig.outputs[0].shape)
        dim = normalize_dim(sig.attrs.dim, rank)
        if out.layout == "block_sharded":
            return "concat.block_sharded: block-sharded concat is unsupported"
        if dim == rank - 1 and out.layout != "height_sharded":
            return ("concat.width_concat_needs_height_sharded: concat on the last dim needs "
                    "height-sharded inputs")
        if rank >= 2 and dim == rank - 2 and out.layout != "width_sharded":
            return ("concat.height_concat_needs_width_sharded: concat on dim -2 needs "
                    "width-sharded inputs")
        if dim < rank - 2:
            return "concat.interleaved_only: concat on a leading dim runs interleaved"
        if not all(o.geom.fits_grid(out) for o in sig.inputs):
            return f"concat.input_grid: some input cannot be sharded on {out.key}"
        return None

    def sharded_input(self, sig, out, i) -> MemConfig | None:
        return out if out.is_sharded else None

    def operand_rule(self, sig, out, i, m) -> str | None:
        if m != self.sharded_input(sig, out, i):
            want = out.key if out.is_sharded else "interleaved"
            return f"concat.inputs_share_layout: every concat input must be {want}"
        return None


class DataMovement(Family):
    """reshape, permute and transpose: never read width-sharded input."""

    def output_rule(self, sig, out) -> str | None:
        if not out.is_sharded:
            return None
        if sig.type != "reshape":
            return f"{sig.type}.output_interleaved: {sig.type} writes interleaved output"
        if out.layout == "width_sharded":
            return "reshape.width_sharded: reshape works on whole rows, never width-sharded"
        if sig.inputs[0].geom.tile_shape != sig.out.tile_shape:
            return "reshape.sharded_needs_same_2d: a sharded reshape must keep the 2-D shape"
        return None

    def input_options(self, sig, out, i, device) -> list[MemConfig]:
        if out.is_sharded:
            return [DRAM, L1_INTERLEAVED, out]
        rows_whole = [m for m in sharded_configs(sig.inputs[0].geom, device.grid_rc)
                      if m.layout != "width_sharded"]
        return [DRAM, L1_INTERLEAVED, *rows_whole[:ACCEPT_SHARDED_ALTERNATIVES]]

    def operand_rule(self, sig, out, i, m) -> str | None:
        kind = "reshape" if sig.type == "reshape" else "permute"
        if m.layout == "width_sharded":
            return f"{kind}.width_sharded_input: {sig.type} rejects width-sharded input"
        if out.is_sharded and m != out:
            return f"reshape.shard_mismatch: a sharded input must be {out.key}"
        return None


FAMILIES: dict[str, Family] = {
    **{t: Eltwise() for t in (*UNARY_TYPES, *BINARY_TYPES, "softmax", "layernorm", "rmsnorm")},
    "matmul": Matmul(), "linear": Matmul(), "conv2d": Conv2d(),
    **{t: Pool() for t in POOL_TYPES}, "concat": Concat(),
    **{t: DataMovement() for t in ("reshape", "permute", "transpose")},
    **{t: Interleaved() for t in (*REDUCE_TYPES, "slice", "embedding", "opaque")},
}


def input_rule(sig: OpSig, out: MemConfig, i: int, m: MemConfig) -> str | None:
    """Why op ``sig`` configured for output ``out`` cannot read operand ``i`` from ``m``."""
    operand = sig.inputs[i]
    if operand.constant and m != DRAM:
        return "operand.constant_dram: constants (weights) are read from DRAM"
    if not operand.geom.fits_grid(m):
        return (f"memcfg.grid: operand {i} cannot be sharded on {m.key} "
                "(a core would hold no tile)")
    if not m.is_sharded:
        if sig.type == "opaque" and m.is_l1:
            return "opaque.dram_only: an opaque op reads and writes DRAM only"
        return None
    return FAMILIES[sig.type].operand_rule(sig, out, i, m)


def output_rule(sig: OpSig, out: MemConfig, knobs: dict[str, int],
                device: DeviceSpec) -> str | None:
    """Why ``out`` with ``knobs`` is not a legal configuration of op ``sig`` on ``device``."""
    if not sig.out.fits_grid(out):
        return (f"memcfg.grid: the output cannot be sharded on {out.key} "
                "(a core would hold no tile)")
    family = FAMILIES[sig.type]
    reason = family.output_rule(sig, out)
    if reason is None and knobs not in family.knob_options(sig, out, device):
        allowed = [config_id(out, k) for k in family.knob_options(sig, out, device)]
        reason = (f"knobs.unknown: knobs {knobs} are not offered for {out.key}; "
                  f"choose one of {allowed}")
    return reason


def build_candidate(sig: OpSig, out: MemConfig, knobs: dict[str, int],
                    device: DeviceSpec) -> Candidate | str:
    """The candidate for (``out``, ``knobs``), or the rule that forbids it."""
    reason = output_rule(sig, out, knobs, device)
    if reason:
        return reason
    family = FAMILIES[sig.type]
    accepts = []
    cores = cost.working_cores(device, sig.out, out)
    for i in range(len(sig.inputs)):
        ok = family.reads(sig, out, knobs, i, device)
        if not ok:
            return f"operand.unreadable: no memory configuration of operand {i} is accepted"
        accepts.append(ok)
    cb_bytes = family.cb_tiles(sig, out, knobs, device) * sig.out.tile_bytes
    return Candidate(
        id=config_id(out, knobs), output=out, knobs=tuple(sorted(knobs.items())),
        accepts=tuple(accepts), cb_bytes_per_core=cb_bytes,
        compute_us=family.compute_us(sig, out, knobs, device),
        write_us=sum(cost.access_us(device, o.geom, out, cores) for o in sig.outputs),
        fixed_us=cost.fixed_us(device) + family.prologue_us(sig, out, device),
        program=family.program(sig, out, knobs, device))


def candidates(sig: OpSig, device: DeviceSpec,
               max_configs: int = DEFAULT_MAX_CONFIGS) -> list[Candidate]:
    """Legal configurations, interleaved ones first, then sharded by grid size, capped.

    A configuration whose scratch plus its own output overflows the usable L1 is left
    out: it could never run, whatever else is resident.
    """
    family = FAMILIES[sig.type]
    found: list[Candidate] = []
    for out in family.output_options(sig, device):
        for knobs in family.knob_options(sig, out, device):
            c = build_candidate(sig, out, knobs, device)
            if isinstance(c, Candidate) and c.cb_bytes_per_core + sig.out.bytes_per_core(
                    out, device.cores) <= device.usable_l1_bytes:
                found.append(c)
            if len(found) >= max_configs:
                return found
    return found
