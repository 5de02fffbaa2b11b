"""``/docs`` (Swagger UI) and ``/redoc``, served with no network access.

FastAPI's own pages load swagger-ui and ReDoc from a CDN, so they are blank offline. These
serve the same pages with the JS, CSS and favicon taken from the ``fastapi-standalone-docs``
wheel (swagger-ui 5 and ReDoc 2 dist files, with their licences), mounted under ``/static``.
Only its files are used, not its ``StandaloneDocs`` helper (which patches FastAPI globally).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL = "/docs"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
REDOC_URL = "/redoc"

ASSETS = Path(str(files("fastapi_standalone_docs") / "static"))
SWAGGER_JS = "/static/swagger-ui/swagger-ui-bundle.js"
SWAGGER_CSS = "/static/swagger-ui/swagger-ui.css"
REDOC_JS = "/static/redoc/redoc.standalone.js"
FAVICON = "/static/fastapi/favicon.png"

router = APIRouter(include_in_schema=False)
router.mount("/static/swagger-ui", StaticFiles(directory=ASSETS / "swagger"),
             name="swagger-ui")
router.mount("/static/redoc", StaticFiles(directory=ASSETS / "redoc"), name="redoc")
router.mount("/static/fastapi", StaticFiles(directory=ASSETS / "fastapi"), name="fastapi")


def _root(request: Request) -> str:
    """The prefix the app is served under (behind a proxy), as FastAPI's own pages use it."""
    return str(request.scope.get("root_path", "")).rstrip("/")


@router.get(DOCS_URL, response_class=HTMLResponse)
async def swagger_ui(request: Request) -> HTMLResponse:
    app, root = request.app, _root(request)
    return get_swagger_ui_html(
        openapi_url=root + app.openapi_url, title=f"{app.title} - Swagger UI",
        swagger_js_url=root + SWAGGER_JS, swagger_css_url=root + SWAGGER_CSS,
        swagger_favicon_url=root + FAVICON, oauth2_redirect_url=root + OAUTH2_REDIRECT_URL,
        init_oauth=app.swagger_ui_init_oauth, swagger_ui_parameters=app.swagger_ui_parameters)


@router.get(OAUTH2_REDIRECT_URL, response_class=HTMLResponse)
async def swagger_ui_oauth2_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get(REDOC_URL, response_class=HTMLResponse)
async def redoc(request: Request) -> HTMLResponse:
    app, root = request.app, _root(request)
    return get_redoc_html(openapi_url=root + app.openapi_url, title=f"{app.title} - ReDoc",
                          redoc_js_url=root + REDOC_JS, redoc_favicon_url=root + FAVICON,
                          with_google_fonts=False)
