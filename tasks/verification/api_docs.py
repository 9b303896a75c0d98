"""The verification server's API documentation, offline (issue 36, item 6): FastAPI's
/docs loads Swagger UI from a CDN and is blank without internet. Here /docs (Swagger UI)
and /redoc (ReDoc) load the assets the fastapi-offline package ships, served by the server
itself under /docs-assets; the pages reference nothing else (no CDN, no web fonts, no
validator badge). Privacy cost: none (the OpenAPI schema only)."""
from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

ASSETS = Path(fastapi_offline.__file__).with_name("static")
ASSETS_URL = "/docs-assets"


def serve_api_docs(app: FastAPI) -> None:
    """/docs and /redoc on `app` (made with docs_url=None, redoc_url=None), and their
    assets."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    favicon = f"{ASSETS_URL}/favicon.png"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=str(app.openapi_url), title=f"{app.title}: API",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css", swagger_favicon_url=favicon,
            swagger_ui_parameters={"validatorUrl": None})

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=str(app.openapi_url), title=f"{app.title}: API",
                              redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
                              redoc_favicon_url=favicon, with_google_fonts=False)
