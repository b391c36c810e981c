"""Issue 37 E5: ``/docs`` (Swagger UI) and ``/redoc`` render without internet: every asset they load is
served by the gateway itself (from the fastapi-offline package), none from a CDN."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

#: Any URL in the page: src=/href= attributes, quoted absolute URLs, and the document Swagger UI is told to load.
_REFS = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|["'](https?://[^"']+)["']|url:\s*["']([^"']+)["']""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_load_nothing_from_another_host(gateway_url, page):
    resp = httpx.get(gateway_url + page, timeout=30)
    assert resp.status_code == 200 and "text/html" in resp.headers["content-type"]
    refs = [next(g for g in m if g) for m in _REFS.findall(resp.text)]
    assert refs, resp.text[:500]
    own = urlsplit(gateway_url).netloc
    for ref in refs:
        absolute = urljoin(gateway_url + page, ref)
        assert urlsplit(absolute).netloc == own, f"{page} loads {ref} from another host"
    scripts = [r for r in refs if r.endswith(".js")]
    assert scripts, refs
    for ref in refs:
        asset = httpx.get(urljoin(gateway_url + page, ref), timeout=30)
        assert asset.status_code == 200, ref
        if ref.endswith(".js"):
            assert len(asset.content) > 100_000 and "javascript" in asset.headers["content-type"], ref
        if ref.endswith(".css"):
            assert "text/css" in asset.headers["content-type"], ref
        if ref.endswith("openapi.json"):
            assert "/v1/systemone" in asset.json()["paths"]
