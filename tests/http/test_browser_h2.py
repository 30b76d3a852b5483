"""A real browser page load over HTTP/2 (issue 19, Conformance): headless
Chromium loads a page with 30 subresources (10 stylesheets, 10 scripts,
10 images) from a TLS listener with a self-signed certificate
(--ignore-certificate-errors). The navigation and every resource report
nextHopProtocol 'h2' in the Resource Timing entries, all 30 loaded, and
the access log has the 31 requests as HTTP/2.0."""

import re
import struct
import time
import zlib

from browser import browser  # noqa: F401 (the fixture)
from conftest import free_port
from samples import make_sample  # noqa: F401 (the fixture)
from rawhttp import TIME_SCALE

N = 10  # of each kind: 3 * N = 30 subresources


def png(r, g, b):
    """A 1x1 RGB PNG."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes([0, r, g, b])))
            + chunk(b"IEND", b""))


def make_site(root):
    root.mkdir()
    head, body = [], []
    for i in range(N):
        (root / ("s%d.css" % i)).write_text(".c%d { margin-left: %dpx; }\n" % (i, i))
        (root / ("j%d.js" % i)).write_text("window.loaded%d = %d;\n" % (i, i))
        (root / ("i%d.png" % i)).write_bytes(png(i * 20, 255 - i * 20, 128))
        head.append('<link rel="stylesheet" href="/s%d.css">' % i)
        head.append('<script src="/j%d.js"></script>' % i)
        body.append('<img class="c%d" src="/i%d.png" width="1" height="1">' % (i, i))
    # an empty icon: no /favicon.ico request besides the 31
    page = ('<!doctype html><html><head><title>h2 page</title><link rel="icon" href="data:,">\n%s\n</head>'
            '<body>%s<p id="done"></p></body></html>\n' % ("\n".join(head), "".join(body)))
    (root / "index.html").write_text(page)


# make_server before browser: pytest ends fixtures in reverse, so Chromium
# quits (closing its connections) before the server's teardown looks at its fds
def test_chromium_page_with_30_subresources_over_h2(make_server, browser, tmp_path):  # noqa: F811
    from test_tls import make_cert

    make_cert(tmp_path, "default", "localhost", ["localhost"])
    root = tmp_path / "site"
    make_site(root)
    log = tmp_path / "access.log"
    port = free_port()
    make_server(
        site="listener 127.0.0.1:%d {\n    tls = true\n}\n" % port
        + "site {\n    tls_certificate = default.pem\n    tls_key = default.key\n"
        "    serve_files / {\n        path = %s\n        index = index.html\n    }\n}\n" % root,
        access_log=str(log),
    )
    page = browser(flags=["--ignore-certificate-errors"])
    page.open("https://localhost:%d/" % port)  # returns after the load event
    drv = page.driver
    deadline = time.monotonic() + 10 * TIME_SCALE
    while drv.execute_script("return document.readyState") != "complete":
        assert time.monotonic() < deadline, page.dump()
        time.sleep(0.05)
    nav = drv.execute_script("return performance.getEntriesByType('navigation')[0].nextHopProtocol")
    assert nav == "h2", page.dump()
    res = drv.execute_script(
        "return performance.getEntriesByType('resource').map(e => [new URL(e.name).pathname, e.nextHopProtocol,"
        " e.initiatorType, e.responseStatus === undefined ? 200 : e.responseStatus])")
    paths = sorted(r[0] for r in res)
    want = sorted(["/s%d.css" % i for i in range(N)] + ["/j%d.js" % i for i in range(N)]
                  + ["/i%d.png" % i for i in range(N)])
    assert paths == want, res
    assert all(r[1] == "h2" for r in res), res
    assert all(r[3] == 200 for r in res), res
    # every kind really took effect in the page
    loaded = drv.execute_script(
        "let n = 0; for (let i = 0; i < %d; i++) { if (window['loaded' + i] === i) n++; } "
        "const imgs = [...document.images].filter(im => im.complete && im.naturalWidth === 1).length; "
        "const css = [...document.images].filter(im => getComputedStyle(im).marginLeft === "
        "im.className.slice(1) + 'px').length; return [n, imgs, css];" % N)
    assert loaded == [N, N, N], (loaded, page.dump())
    # the access log: the page and its 30 subresources, all over HTTP/2.0
    deadline = time.monotonic() + 5 * TIME_SCALE
    lines = []
    while time.monotonic() < deadline:
        lines = [ln for ln in (log.read_text() if log.exists() else "").splitlines() if ln]
        if len(lines) >= 3 * N + 1:
            break
        time.sleep(0.1)
    h2lines = [ln for ln in lines if re.search(r'"GET /\S* HTTP/2\.0" 200 ', ln)]
    assert len(lines) == 3 * N + 1 and len(h2lines) == 3 * N + 1, "\n".join(lines)


def test_chat_sample_over_h2(browser, make_sample, tmp_path):  # noqa: F811
    """samples/chat --tls: two Chromium pages load the room over h2 and their
    WebSockets are RFC 8441 streams (wss:// on the h2 connection); a
    message typed in one appears in the other."""
    from test_tls import make_cert

    cert, key = make_cert(tmp_path, "chat", "localhost", ["localhost"])
    app = make_sample("chat", "-t", "1", "--tls", cert, key)
    url = "https://localhost:%d/" % app.port
    netlog = tmp_path / "alice.netlog.json"
    alice = browser(flags=["--ignore-certificate-errors", "--log-net-log=%s" % netlog])
    bob = browser(flags=["--ignore-certificate-errors"])
    for page in (alice, bob):
        page.open(url)
        page.wait_text("#status", lambda t: t == "connected", timeout=10)
        assert page.driver.execute_script(
            "return performance.getEntriesByType('navigation')[0].nextHopProtocol") == "h2", page.dump()
    alice.type("#name", "alice")
    alice.type("#msg", "hello over h2\n")
    bob.wait_text("#log", lambda t: "hello over h2" in t, timeout=10)
    assert [li.text for li in bob.driver.find_elements("css selector", "#log li")] == ["alice:hello over h2"]
    # alice's WebSocket was an extended CONNECT on her h2 connection
    # (Chromium's net log, complete once the browser has quit)
    alice.quit()
    log = netlog.read_text(errors="replace")
    assert re.search(r'":method: CONNECT".{0,400}":protocol: websocket"', log, re.S), log[-3000:]


def test_chat_tls_option_errors(tmp_path):
    """--tls without its two files, or with files that are no certificate:
    a message and a non-zero exit, before any listening."""
    import subprocess

    from samples import sample_bin

    chat = str(sample_bin("chat"))
    p = subprocess.run([chat, "--tls", "only.pem"], capture_output=True, timeout=20)
    assert p.returncode == 2 and b"chat: --tls: a certificate and a key file (PEM)" in p.stderr, p.stderr
    (tmp_path / "bad.pem").write_text("not a certificate\n")
    p = subprocess.run([chat, "--tls", str(tmp_path / "bad.pem"), str(tmp_path / "bad.pem"), "127.0.0.1:%d" % free_port()],
                       capture_output=True, timeout=20)
    assert p.returncode == 1 and b"chat: " in p.stderr and b"bad.pem" in p.stderr, p.stderr
