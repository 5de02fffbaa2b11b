"""ONNX models in, layoutsat graphs out.

``load`` reads the model, pins its symbolic dimensions and folds constants; ``patterns``
recognises decomposed operators (GELU, SiLU, LayerNorm, RMSNorm); ``mapping`` turns the
rest node by node into the op library; ``builder`` assembles and checks the graph,
falling back to ``opaque`` for anything it cannot map; ``stack`` repeats an imported
block. The ``onnx`` package is needed only here (the ``import`` extra).
"""

from solver.onnx_import.importer import ImportOptions, import_onnx

__all__ = ["ImportOptions", "import_onnx"]
