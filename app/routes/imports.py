"""``/v1/layout/import``: an ONNX model in, a layout graph and the import report out.

The model is streamed to a file under the data folder while its size is counted (the
``BodyLimit`` middleware stops it at ``LAYOUTSAT_MAX_IMPORT_BYTES``), never held in the
server's memory, and imported by a worker process of the pool, under its memory limit.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, Field

from app.auth import Caller
from app.jobs.work import run_import
from app.onnx_support import importer, parse_dims
from app.routes.responses import INPUT, responses
from app.service import caller_of, service_of
from solver.deadline import Deadline

router = APIRouter(prefix="/v1/layout", tags=["layout"])

ImportDType = Literal["bf16", "f32", "bfp8", "bfp4"]
IMPORT_TIME_LIMIT_S = 120.0


class ImportAnswer(BaseModel):
    graph: dict = Field(description="the imported layoutsat-graph")
    report: dict = Field(
        description="ops, tensors; ONNX op types mapped, fused, folded and left opaque")


@router.post("/import", response_model=ImportAnswer,
             responses=responses(*INPUT, 500, 503, 504),
             summary="Import an ONNX model as a layout graph",
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/octet-stream": {"schema": {"type": "string",
                                                         "format": "binary"}}}}})
async def import_route(
    request: Request,
    _caller: Annotated[Caller, Depends(caller_of)],
    batch: Annotated[int | None, Query(ge=1, le=2**20, description="dynamic batch dimension")]
    = None,
    seq_len: Annotated[int | None, Query(ge=1, le=2**24,
                                         description="dynamic sequence length")] = None,
    dim: Annotated[list[str], Query(description="NAME=VALUE for any dynamic dimension")] = [],  # noqa: B006
    dtype: ImportDType = "bf16",
    weight_dtype: ImportDType | None = None,
    repeat: Annotated[int, Query(ge=1, le=1024, description="stack N copies")] = 1,
    name: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """The ONNX bytes are the body; unknown operators become opaque ops (see the report)."""
    service = service_of(request)
    options = importer().ImportOptions(batch, seq_len, parse_dims(dim, ("query", "dim")),
                                       dtype, weight_dtype, repeat, name)
    uploads = service.data_dir / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=uploads, suffix=".onnx", delete=False) as out:
        path = Path(out.name)
        try:
            async for chunk in request.stream():
                out.write(chunk)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
    try:
        found = await service.on_pool(run_import, (str(path), options),
                                      Deadline.after(IMPORT_TIME_LIMIT_S))
    finally:
        path.unlink(missing_ok=True)  # the worker removes it, unless it was killed
    return Response(found.body, media_type="application/json")
