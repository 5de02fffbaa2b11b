"""Standard architectures written in plain torch.nn (torchvision is not needed), randomly
initialised: only their shapes matter to the layout optimizer."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def conv_bn(cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1,
            act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# ----------------------------------------------------------------------------- ResNet-50


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(conv_bn(cin, width, 1), conv_bn(width, width, 3, stride),
                                  conv_bn(width, cout, 1, act=None))
        self.down = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout \
            else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.down(x))


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(count):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(2048, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ----------------------------------------------------------------------------- MobileNetV2


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers = [conv_bn(cin, hidden, 1, act=nn.ReLU6)] if expand != 1 else []
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   conv_bn(hidden, cout, 1, act=None)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, 32, 3, 2, act=nn.ReLU6)]
        cin = 32
        for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 1280, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(1280, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# ----------------------------------------------------------------------------- U-Net


class UNet(nn.Module):
    """The classic encoder-decoder with skip connections (4 levels, 32 base channels)."""

    def __init__(self, cin: int = 3, classes: int = 2, base: int = 32):
        super().__init__()
        chans = [base * 2 ** i for i in range(5)]
        self.down = nn.ModuleList()
        c = cin
        for ch in chans:
            self.down.append(nn.Sequential(conv_bn(c, ch), conv_bn(ch, ch)))
            c = ch
        self.up = nn.ModuleList()
        self.merge = nn.ModuleList()
        for ch in reversed(chans[:-1]):
            self.up.append(nn.ConvTranspose2d(ch * 2, ch, 2, 2))
            self.merge.append(nn.Sequential(conv_bn(ch * 2, ch), conv_bn(ch, ch)))
        self.head = nn.Conv2d(base, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips[:-1]), strict=True):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.head(x)


# ----------------------------------------------------------------------------- YOLO-style


class C3(nn.Module):
    """CSP bottleneck block of YOLOv5-style backbones (SiLU activations)."""

    def __init__(self, cin: int, cout: int, n: int):
        super().__init__()
        hidden = cout // 2
        self.a = conv_bn(cin, hidden, 1, act=nn.SiLU)
        self.b = conv_bn(cin, hidden, 1, act=nn.SiLU)
        self.m = nn.ModuleList(nn.Sequential(conv_bn(hidden, hidden, 1, act=nn.SiLU),
                                             conv_bn(hidden, hidden, 3, act=nn.SiLU))
                               for _ in range(n))
        self.out = conv_bn(2 * hidden, cout, 1, act=nn.SiLU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.a(x)
        for m in self.m:
            a = a + m(a)
        return self.out(torch.cat([a, self.b(x)], dim=1))


class SPPF(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.a = conv_bn(c, c // 2, 1, act=nn.SiLU)
        self.out = conv_bn(c * 2, c, 1, act=nn.SiLU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        y1 = F.max_pool2d(x, 5, 1, 2)
        y2 = F.max_pool2d(y1, 5, 1, 2)
        return self.out(torch.cat([x, y1, y2, F.max_pool2d(y2, 5, 1, 2)], dim=1))


class YoloBackbone(nn.Module):
    """A YOLOv5s-sized CSP-Darknet backbone (640x640 input) returning its three feature maps."""

    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 32, 6, 2, act=nn.SiLU)
        self.s1 = nn.Sequential(conv_bn(32, 64, 3, 2, act=nn.SiLU), C3(64, 64, 1))
        self.s2 = nn.Sequential(conv_bn(64, 128, 3, 2, act=nn.SiLU), C3(128, 128, 2))
        self.s3 = nn.Sequential(conv_bn(128, 256, 3, 2, act=nn.SiLU), C3(256, 256, 3))
        self.s4 = nn.Sequential(conv_bn(256, 512, 3, 2, act=nn.SiLU), C3(512, 512, 1), SPPF(512))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        p3 = self.s2(self.s1(self.stem(x)))
        p4 = self.s3(p3)
        return p3, p4, self.s4(p4)


# ----------------------------------------------------------------------------- transformers


class EncoderLayer(nn.Module):
    """Post-norm (BERT) or pre-norm (ViT) transformer encoder layer with GELU MLP."""

    def __init__(self, d: int, heads: int, ff: int, pre_norm: bool):
        super().__init__()
        self.heads, self.pre_norm = heads, pre_norm
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        return self.proj(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mlp = lambda t: self.ff2(F.gelu(self.ff1(t)))  # noqa: E731
        if self.pre_norm:
            x = x + self.attention(self.ln1(x))
            return x + mlp(self.ln2(x))
        x = self.ln1(x + self.attention(x))
        return self.ln2(x + mlp(x))


class Bert(nn.Module):
    def __init__(self, layers: int = 12, d: int = 768, heads: int = 12, vocab: int = 30522,
                 seq: int = 384):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.Sequential(*(EncoderLayer(d, heads, 4 * d, False) for _ in range(layers)))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.layers(self.ln(self.tok(ids) + self.pos))


class ViT(nn.Module):
    def __init__(self, layers: int = 12, d: int = 768, heads: int = 12, patch: int = 16,
                 image: int = 224, classes: int = 1000):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        tokens = (image // patch) ** 2 + 1
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, tokens, d) * 0.02)
        self.layers = nn.Sequential(*(EncoderLayer(d, heads, 4 * d, True) for _ in range(layers)))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.ln(self.layers(x))[:, 0])


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaLayer(nn.Module):
    """One Llama decoder layer: RMSNorm, grouped-query attention with rotary embeddings
    (tables as constants), SwiGLU MLP. ``past`` is the KV cache length (decode) or 0.
    Gemma-2-style layers (``gemma``) differ in three ways: heads wider than d / heads
    (``head_dim``), a GeGLU MLP (tanh GELU) and RMSNorms after attention and MLP too."""

    def __init__(self, d: int, heads: int, kv_heads: int, ff: int, tokens: int, past: int,
                 head_dim: int | None = None, gemma: bool = False):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, head_dim or d // heads
        self.gemma = gemma
        self.q = nn.Linear(d, heads * self.hd, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(heads * self.hd, d, bias=False)
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        if gemma:
            self.post1, self.post2 = RMSNorm(d), RMSNorm(d)
        angles = torch.arange(past, past + tokens)[:, None] / \
            (500000 ** (torch.arange(0, self.hd, 2) / self.hd))[None]
        self.register_buffer("cos", torch.cat([angles.cos()] * 2, -1)[None, None])
        self.register_buffer("sin", torch.cat([angles.sin()] * 2, -1)[None, None])
        mask = torch.full((tokens, past + tokens), float("-inf")).triu(past + 1)
        self.register_buffer("mask", mask[None, None])

    def rotate(self, t: torch.Tensor) -> torch.Tensor:
        half = t.shape[-1] // 2
        return t * self.cos + torch.cat([-t[..., half:], t[..., :half]], -1) * self.sin

    def forward(self, x: torch.Tensor, past_k: torch.Tensor | None = None,
                past_v: torch.Tensor | None = None) -> torch.Tensor:
        b, s, d = x.shape
        h = self.n1(x)
        q = self.q(h).reshape(b, s, self.heads, self.hd).transpose(1, 2)
        k = self.k(h).reshape(b, s, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(h).reshape(b, s, self.kv_heads, self.hd).transpose(1, 2)
        q, k = self.rotate(q), self.rotate(k)
        if past_k is not None:
            k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, 1)
        v = v.repeat_interleave(rep, 1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.hd) + self.mask
        attn = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, self.heads * self.hd)
        attn = self.o(attn)
        x = x + (self.post1(attn) if self.gemma else attn)
        h = self.n2(x)
        act = F.gelu(self.gate(h), approximate="tanh") if self.gemma else F.silu(self.gate(h))
        mlp = self.down(act * self.up(h))
        return x + (self.post2(mlp) if self.gemma else mlp)


class SegformerBlock(nn.Module):
    """A Segformer (MiT) encoder block: overlapping patch embedding, efficient
    self-attention with spatial reduction, Mix-FFN with a depthwise 3x3 conv."""

    def __init__(self, cin: int = 3, d: int = 64, heads: int = 1, reduction: int = 8,
                 image: int = 512):
        super().__init__()
        self.embed = nn.Conv2d(cin, d, 7, 4, 3)
        self.ln0, self.ln1, self.ln2, self.ln_sr = (nn.LayerNorm(d) for _ in range(4))
        self.heads, self.side = heads, image // 4
        self.q, self.kv, self.proj = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.sr = nn.Conv2d(d, d, reduction, reduction)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.dw = nn.Conv2d(4 * d, 4 * d, 3, 1, 1, groups=4 * d)

    def tokens_to_image(self, t: torch.Tensor) -> torch.Tensor:
        b, n, c = t.shape
        return t.transpose(1, 2).reshape(b, c, self.side, self.side)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln0(self.embed(x).flatten(2).transpose(1, 2))
        b, n, d = x.shape
        h = self.ln1(x)
        kv_src = self.ln_sr(self.sr(self.tokens_to_image(h)).flatten(2).transpose(1, 2))
        k, v = self.kv(kv_src).split(d, -1)
        q = self.q(h)
        attn = (q @ k.transpose(-2, -1) / math.sqrt(d)).softmax(-1) @ v
        x = x + self.proj(attn)
        h = self.fc1(self.ln2(x))
        h = self.dw(self.tokens_to_image(h)).flatten(2).transpose(1, 2)
        return x + self.fc2(F.gelu(h))
