"""``/docs`` (Swagger UI) and ``/redoc`` render without internet: every asset they load is
served by the gateway itself (from the fastapi-offline package), none from a CDN; where Chromium is
installed (``apt-get install chromium``), ``/docs`` is rendered in it with no other host reachable."""

from __future__ import annotations

import re
import shutil
import subprocess
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

#: Any URL in the page: src=/href= attributes, quoted absolute URLs, and the document Swagger UI is told to load.
_REFS = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|["'](https?://[^"']+)["']|url:\s*["']([^"']+)["']""")


@pytest.mark.slow
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


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium (apt-get install chromium) to render /docs")
@pytest.mark.timeout(180)
def test_docs_renders_in_a_headless_browser_with_no_other_host(gateway_url):
    """Swagger UI runs in Chromium with every name but loopback unresolvable: its title, the bearer scheme's
    Authorize button and the operations appear (the page is built by the script, so it ran)."""
    out = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                          "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--dump-dom",
                          gateway_url + "/docs"], capture_output=True, text=True, timeout=150)
    dom = out.stdout
    assert out.returncode == 0 and 'class="title">jev System One gateway' in dom, out.stderr[-2000:]
    assert "authorize" in dom.lower()
    assert 'data-path="/v1/systemone"' in dom and 'data-path="/v1/models"' in dom
