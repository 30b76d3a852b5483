"""A WebSocket from a real browser over HTTP/2 (RFC 8441): headless
Chromium loads a page from a TLS listener by ALPN h2 (a test certificate,
--ignore-certificate-errors), the page opens wss:// to ws_echo; Chromium
takes the connection's SETTINGS_ENABLE_CONNECT_PROTOCOL and sends an
extended CONNECT on it, which the access log shows as a CONNECT over
HTTP/2.0. The echo comes back to the page."""

import time

from browser import browser  # noqa: F401 (the fixture)
from conftest import free_port
from rawhttp import TIME_SCALE

PAGE = """<!doctype html><title>ws</title><p id="status">starting</p><p id="got"></p>
<script>
document.getElementById('status').textContent = performance.getEntriesByType('navigation')[0].nextHopProtocol;
const ws = new WebSocket('wss://' + location.host + '/ws');
ws.onopen = () => ws.send('hello over h2');
ws.onmessage = (e) => { document.getElementById('got').textContent = 'echo:' + e.data; ws.close(1000); };
ws.onerror = () => { document.getElementById('got').textContent = 'error'; };
</script>
"""


# make_server before browser: pytest ends fixtures in reverse, so Chromium
# quits (closing its connections) before the server's teardown looks at its fds
def test_chromium_websocket_over_h2(make_server, browser, tmp_path):  # noqa: F811
    from test_tls import make_cert

    make_cert(tmp_path, "default", "localhost", ["localhost"])
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text(PAGE)
    log = tmp_path / "access.log"
    port = free_port()
    make_server(
        site="listener 127.0.0.1:%d {\n    tls = true\n}\n" % port + "site {\n    tls_certificate = default.pem\n    tls_key = default.key\n"
        "    handler /ws ws_echo\n    serve_files / {\n        path = %s\n        index = index.html\n    }\n}\n" % root,
        access_log=str(log),
    )
    srv_tls = "https://localhost:%d/" % port
    page = browser(flags=["--ignore-certificate-errors"])
    page.open(srv_tls)
    page.wait_text("#got", lambda t: t == "echo:hello over h2", timeout=15)
    assert page.text("#status") == "h2", page.dump()
    deadline = time.monotonic() + 5 * TIME_SCALE
    while time.monotonic() < deadline and "CONNECT /ws" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.1)
    text = log.read_text()
    assert '"CONNECT /ws HTTP/2.0" 200' in text, text
