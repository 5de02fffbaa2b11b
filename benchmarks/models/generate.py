"""Build standard architectures with PyTorch on the CPU, export them to ONNX and import
them into layoutsat graphs under benchmarks/layout/models/.

    .venv/bin/pip install torch==2.13.0 onnx        # a CPU build lies on this machine's disk
    .venv/bin/python benchmarks/models/generate.py [--only NAME ...] [--keep-onnx DIR]

Weights are random (no downloads; only shapes matter). Models with billions of parameters
are never materialized: one decoder layer is exported and ``--repeat`` stacks it (the
importer's ``repeat`` option). The test suite reads the JSON files and never needs torch.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import architectures as arch  # noqa: E402

from solver.onnx_import import ImportOptions, import_onnx  # noqa: E402

OUT = ROOT / "benchmarks" / "layout" / "models"
LLAMA_1B = {"d": 2048, "heads": 32, "kv_heads": 8, "ff": 8192}
LLAMA_8B = {"d": 4096, "heads": 32, "kv_heads": 8, "ff": 14336}
LLAMA_70B = {"d": 8192, "heads": 64, "kv_heads": 8, "ff": 28672}
GEMMA_27B = {"d": 4608, "heads": 32, "kv_heads": 16, "ff": 36864, "head_dim": 128,
             "gemma": True}
MESH_OUT = ROOT / "benchmarks" / "layout" / "mesh_models"
"""Graphs for meshes (``benchmarks/mesh.py``): too large for one chip, or planned on a
mesh by default (the graph names its mesh)."""


@dataclass
class Spec:
    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    input_names: list[str]
    repeat: int = 1
    options: dict = field(default_factory=dict)
    device: str | None = None
    """The graph's own device, when the default (a Wormhole n150) cannot hold it."""
    mesh: str | None = None
    """The graph's own mesh: written to ``mesh_models/`` instead, for the mesh suite."""


def image(batch: int, side: int) -> Callable[[], tuple[torch.Tensor, ...]]:
    return lambda: (torch.randn(batch, 3, side, side),)


def llama(name: str, shape: dict, layers: int, tokens: int, past: int,
          device: str | None = None, mesh: str | None = None,
          options: dict | None = None) -> Spec:
    cache_dim = shape.get("head_dim") or shape["d"] // shape["heads"]
    extra = {k: shape[k] for k in ("head_dim", "gemma") if k in shape}

    def inputs_of() -> tuple[torch.Tensor, ...]:
        x = torch.randn(1, tokens, shape["d"])
        if not past:
            return (x,)
        cache = torch.randn(1, shape["kv_heads"], past, cache_dim)
        return x, cache, cache.clone()

    return Spec(name, lambda: arch.LlamaLayer(shape["d"], shape["heads"], shape["kv_heads"],
                                              shape["ff"], tokens, past, **extra),
                inputs_of, ["hidden", "past_k", "past_v"][: 3 if past else 1], repeat=layers,
                device=device, mesh=mesh, options=options or {})


SPECS = [
    Spec("resnet50-b1", arch.ResNet50, image(1, 224), ["image"]),
    Spec("resnet50-b8", arch.ResNet50, image(8, 224), ["image"]),
    Spec("mobilenetv2", arch.MobileNetV2, image(1, 224), ["image"]),
    Spec("unet", arch.UNet, image(1, 256), ["image"]),
    Spec("yolo-backbone", arch.YoloBackbone, image(1, 640), ["image"]),
    Spec("bert-base-s384", arch.Bert, lambda: (torch.randint(0, 30522, (1, 384)),), ["ids"]),
    Spec("vit-b16", arch.ViT, image(1, 224), ["image"]),
    Spec("segformer-block", arch.SegformerBlock, image(1, 512), ["image"]),
    llama("llama-3.2-1b-prefill128-l1", LLAMA_1B, 1, 128, 0),
    llama("llama-3.2-1b-prefill128-l16", LLAMA_1B, 16, 128, 0),
    llama("llama-3.2-1b-decode-kv1024-l1", LLAMA_1B, 1, 1, 1024),
    llama("llama-3.2-1b-decode-kv1024-l16", LLAMA_1B, 16, 1, 1024),
    # 14.0 GB of bf16 weights: more than a Wormhole chip's 12 GiB of DRAM
    llama("llama-3.1-8b-prefill128-l32", LLAMA_8B, 32, 128, 0, device="blackhole_p150"),
    # mesh suite: 8B in bf16 (16 GB: two Wormhole chips at least), 70B and Gemma-2-27B with
    # bfp8 weights as TT-NN's demos run them (70 GB: a Galaxy, or a T3000 split 8 ways)
    llama("llama-3.1-8b-decode-kv1024-l32", LLAMA_8B, 32, 1, 1024, mesh="t3000"),
    llama("llama-3.1-70b-prefill128-l80", LLAMA_70B, 80, 128, 0, mesh="galaxy",
          options={"weight_dtype": "bfp8"}),
    llama("llama-3.1-70b-decode-kv1024-l80", LLAMA_70B, 80, 1, 1024, mesh="galaxy",
          options={"weight_dtype": "bfp8"}),
    llama("gemma-2-27b-decode-kv1024-l46", GEMMA_27B, 46, 1, 1024, mesh="t3000",
          options={"weight_dtype": "bfp8"}),
]


PROTOBUF_BYTES = 2**31 - 2**26
"""An ONNX file holds at most 2 GiB: larger layers (a 70B decoder layer is 3.4 GB in f32)
are exported in f16; the importer gives every tensor its own dtype option anyway."""


def export(spec: Spec, path: Path) -> None:
    torch.manual_seed(0)
    model = spec.build().eval()
    inputs = spec.inputs()
    if sum(p.numel() * p.element_size() for p in model.parameters()) > PROTOBUF_BYTES:
        model = model.half()
        inputs = tuple(t.half() if t.is_floating_point() else t for t in inputs)
    with torch.no_grad():
        torch.onnx.export(model, inputs, str(path), dynamo=False, opset_version=17,
                          input_names=spec.input_names, do_constant_folding=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="model names to (re)build")
    parser.add_argument("--keep-onnx", type=Path, help="keep the exported .onnx files here")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep_onnx or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for spec in SPECS:
            if args.only and spec.name not in args.only:
                continue
            started = time.perf_counter()
            onnx_path = folder / f"{spec.name}.onnx"
            export(spec, onnx_path)
            result = import_onnx(onnx_path.read_bytes(),
                                 ImportOptions(repeat=spec.repeat, name=spec.name,
                                               **spec.options))
            doc = result.graph.model_dump(mode="json", exclude_defaults=True, by_alias=True)
            doc.update(format="layoutsat-graph", version=1, name=spec.name)
            if spec.device is not None:
                doc["device"] = spec.device
            folder_out = OUT if spec.mesh is None else MESH_OUT
            if spec.mesh is not None:
                doc["mesh"] = spec.mesh
            folder_out.mkdir(parents=True, exist_ok=True)
            text = json.dumps(doc, separators=(",", ":")) + "\n"
            (folder_out / f"{spec.name}.json").write_text(text)
            r = result.report
            print(f"{spec.name}: {r['ops']} ops, {r['tensors']} tensors, opaque "
                  f"{r['opaque'] or '-'}, fused {r['fused'] or '-'}, permutes "
                  f"{r['permutes_inserted']} ({time.perf_counter() - started:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
