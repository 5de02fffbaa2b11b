"""Write the example layout graphs (realistic shapes) as JSON next to this script.

    python benchmarks/layout/generate.py        # rewrites benchmarks/layout/*.json

Also writes the small example shipped with the service (app/examples/layout-mlp-small.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.graph_builder import Graph  # noqa: E402


def mlp(seq: int = 256, d: int = 1024, ff: int = 4096, name: str = "mlp-block") -> dict:
    """A pre-norm transformer MLP block: layernorm, up (GELU), down, residual add."""
    g = Graph(name)
    x = g.input("x", [1, seq, d])
    h = g.norm("layernorm", "ln", x)
    h = g.linear("fc1", h, ff, activation="gelu")
    h = g.linear("fc2", h, d)
    return g.document([g.binary("add", "residual", x, h)])


def attention(g: Graph, x: str, heads: int, kv_heads: int, head_dim: int, bias: bool,
              rope: bool) -> str:
    """Multi-head (grouped-query) self-attention; returns the output projection."""
    b, s, d = g.shapes[x]

    def heads_of(name: str, n: int) -> str:
        t = g.linear(name, x, n * head_dim, bias=bias)
        t = g.reshape(f"{name}.split", t, [b, s, n, head_dim])
        return g.permute(f"{name}.heads", t, [0, 2, 1, 3])

    q, k, v = heads_of("q", heads), heads_of("k", kv_heads), heads_of("v", kv_heads)
    if rope:
        cos = g.input("rope.cos", [1, 1, s, head_dim])
        sin = g.input("rope.sin", [1, 1, s, head_dim])
        q, k = (_rope(g, t, cos, sin) for t in (q, k))
    if kv_heads != heads:
        rep = heads // kv_heads
        k = g.op("concat", "k.repeat", [k] * rep, [b, heads, s, head_dim], dim=1)
        v = g.op("concat", "v.repeat", [v] * rep, [b, heads, s, head_dim], dim=1)
    scores = g.op("matmul", "scores", [q, k], [b, heads, s, s], transpose_b=True)
    scores = g.binary("mul", "scale", scores, g.const("scale.c", [1]))
    mask = g.input("mask", [1, 1, s, s] if rope else [1, 1, 1, s])
    scores = g.binary("add", "masked", scores, mask)
    probs = g.op("softmax", "probs", [scores], [b, heads, s, s], dim=-1)
    ctx = g.op("matmul", "context", [probs, v], [b, heads, s, head_dim])
    ctx = g.permute("context.merge", ctx, [0, 2, 1, 3])
    ctx = g.reshape("context.flat", ctx, [b, s, heads * head_dim])
    return g.linear("o", ctx, d, bias=bias)


def _rope(g: Graph, t: str, cos: str, sin: str) -> str:
    """Rotary embedding with the rotate-half pattern: slices, a negation and a concat."""
    b, h, s, hd = g.shapes[t]
    half = hd // 2
    first = g.op("slice", f"{t}.x1", [t], [b, h, s, half], starts=[0, 0, 0, 0],
                 ends=[b, h, s, half])
    second = g.op("slice", f"{t}.x2", [t], [b, h, s, half], starts=[0, 0, 0, half],
                  ends=[b, h, s, hd])
    rotated = g.op("concat", f"{t}.rot", [g.unary("neg", f"{t}.neg", second), first],
                   [b, h, s, hd], dim=-1)
    return g.binary("add", f"{t}.rope", g.binary("mul", f"{t}.cos", t, cos),
                    g.binary("mul", f"{t}.sin", rotated, sin))


def bert_layer(seq: int = 384) -> dict:
    """BERT-base encoder layer: 12 heads of 64, hidden 768, FF 3072, post-norm."""
    g = Graph("bert-base-layer")
    x = g.input("x", [1, seq, 768])
    attn = attention(g, x, heads=12, kv_heads=12, head_dim=64, bias=True, rope=False)
    h = g.norm("layernorm", "ln1", g.binary("add", "attn.residual", x, attn))
    ff = g.linear("ff1", h, 3072, activation="gelu")
    ff = g.linear("ff2", ff, 768)
    return g.document([g.norm("layernorm", "ln2", g.binary("add", "ff.residual", h, ff))])


def llama_layer(tokens: int = 128) -> dict:
    """Llama-3.2-1B-shaped decoder layer, prefill: GQA 32/8 heads of 64, RoPE, SwiGLU 8192."""
    g = Graph("llama-decoder-layer")
    x = g.input("x", [1, tokens, 2048])
    attn = attention(g, g.norm("rmsnorm", "attn_norm", x), heads=32, kv_heads=8, head_dim=64,
                     bias=False, rope=True)
    h = g.binary("add", "attn.residual", x, attn)
    n = g.norm("rmsnorm", "ffn_norm", h)
    gate = g.unary("silu", "gate.act", g.linear("gate", n, 8192, bias=False))
    up = g.linear("up", n, 8192, bias=False)
    down = g.linear("down", g.binary("mul", "swiglu", gate, up), 2048, bias=False)
    return g.document([g.binary("add", "ffn.residual", h, down)])


def resnet_bottleneck() -> dict:
    """ResNet-50 conv2_x identity bottleneck: 1x1/64, 3x3/64, 1x1/256, residual fork, ReLU."""
    g = Graph("resnet50-bottleneck")
    x = g.input("x", [1, 56, 56, 256])
    h = g.conv("conv1", x, 64, 1)
    h = g.conv("conv2", h, 64, 3)
    h = g.conv("conv3", h, 256, 1, relu=False)
    return g.document([g.unary("relu", "out", g.binary("add", "residual", h, x))])


def inception(g: Graph, x: str, tag: str, c1: int, c3r: int, c3: int, c5r: int, c5: int,
              pool: int) -> str:
    """GoogLeNet inception module: four branches concatenated along channels."""
    n, h, w, _ = g.shapes[x]
    b1 = g.conv(f"{tag}.1x1", x, c1, 1)
    b2 = g.conv(f"{tag}.3x3", g.conv(f"{tag}.3x3r", x, c3r, 1), c3, 3)
    b3 = g.conv(f"{tag}.5x5", g.conv(f"{tag}.5x5r", x, c5r, 1), c5, 5)
    p = g.op("max_pool2d", f"{tag}.pool", [x], g.shapes[x], kernel_size=[3, 3],
             stride=[1, 1], padding=[1, 1])
    b4 = g.conv(f"{tag}.poolproj", p, pool, 1)
    return g.op("concat", f"{tag}.concat", [b1, b2, b3, b4], [n, h, w, c1 + c3 + c5 + pool],
                dim=-1)


def concat_block() -> dict:
    """Two GoogLeNet inception modules (3a, 3b) at 28x28: concat-heavy, with forks."""
    g = Graph("inception-3a-3b")
    x = g.input("x", [1, 28, 28, 192])
    y = inception(g, x, "3a", 64, 96, 128, 16, 32, 32)
    y = inception(g, y, "3b", 128, 128, 192, 32, 96, 64)
    return g.document([y])


EXAMPLES = {"mlp-block": mlp, "bert-base-layer": bert_layer, "llama-decoder-layer": llama_layer,
            "resnet50-bottleneck": resnet_bottleneck, "inception-concat": concat_block}


def main() -> None:
    for name, build in EXAMPLES.items():
        (HERE / f"{name}.json").write_text(json.dumps(build(), indent=1) + "\n")
    small = mlp(seq=64, d=256, ff=1024, name="mlp-small")
    small["device"] = "wormhole_n150"
    (ROOT / "app" / "examples" / "layout-mlp-small.json").write_text(
        json.dumps(small, indent=1) + "\n")


if __name__ == "__main__":
    main()
