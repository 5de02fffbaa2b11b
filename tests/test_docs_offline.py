"""/docs and /redoc load their JS and CSS from the service itself, never from a CDN."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


class _Refs(HTMLParser):
    """Every src and href of a page, by tag."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.all: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for key in ("src", "href"):
            if found.get(key):
                self.all.append(found[key])
        if tag == "script" and found.get("src"):
            self.scripts.append(found["src"])
        if tag == "link" and found.get("rel") == "stylesheet":
            self.styles.append(found["href"])


def refs(html: str) -> _Refs:
    parser = _Refs()
    parser.feed(html)
    return parser


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> TestClient:
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("docs"), pool_workers=1))
    with TestClient(app) as c:
        yield c


def same_origin(url: str) -> bool:
    return url.startswith("/") and not url.startswith("//") and "://" not in url


def assert_local_assets(client: TestClient, page: str, *, scripts: int, styles: int) -> _Refs:
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    found = refs(r.text)
    assert len(found.scripts) == scripts and len(found.styles) == styles, found.all
    for url in found.all:
        assert same_origin(url), f"{page} loads {url} from elsewhere"
    assert not re.search(r"""(src|href|url)\s*[=:]\s*['"]?(https?:)?//""", r.text), r.text
    for url, kind in [*((u, "javascript") for u in found.scripts),
                      *((u, "css") for u in found.styles)]:
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert asset.headers["content-type"].startswith(f"text/{kind}"), (url, asset.headers)
        assert len(asset.content) > 50_000, (url, len(asset.content))
    return found


def test_swagger_ui_is_served_from_the_service(client):
    found = assert_local_assets(client, "/docs", scripts=1, styles=1)
    bundle = client.get(found.scripts[0]).text
    # FastAPI writes OpenAPI 3.1, which swagger-ui renders from version 5 on.
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")
    version = re.search(r'PACKAGE_VERSION:"(\d+)\.', bundle)
    assert version and int(version.group(1)) >= 5
    favicon = [u for u in found.all if u.endswith(".png")]
    assert favicon and client.get(favicon[0]).headers["content-type"] == "image/png"


def test_redoc_is_served_from_the_service_without_google_fonts(client):
    found = assert_local_assets(client, "/redoc", scripts=1, styles=0)
    assert "fonts.googleapis" not in client.get("/redoc").text
    assert "Redoc" in client.get(found.scripts[0]).text[:2000]


def test_oauth2_redirect_page(client):
    r = client.get("/docs/oauth2-redirect")
    assert r.status_code == 200 and "oauth2" in r.text.lower()


def test_docs_routes_stay_out_of_the_schema(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith(("/docs", "/redoc", "/static"))]
