"""HTTPS (issue 18): TLS listeners, certificates per site (SNI), ALPN,
protocol versions, the 421 on an SNI/Host mismatch, redirect_to_https,
colibri_req_is_secure() through the stack, and the config errors. Real
clients: Python ssl, curl and openssl s_client; certificates made by
openssl in tmp_path."""
import os
import re
import shutil
import socket
import ssl
import subprocess
import time

import pytest

from conftest import colibri_bin, free_port
from rawhttp import TIME_SCALE, recv_until
from test_modules import greet_so  # noqa: F401 (the session fixture)
from test_proxy import upstreams  # noqa: F401 (the fixture)

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def make_cert(d, name, cn, sans, kind="ec"):
    key, cert = d / (name + ".key"), d / (name + ".pem")
    algo = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] if kind == "ec" else ["-newkey", "rsa:2048"]
    subprocess.run(
        ["openssl", "req", "-x509", *algo, "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", "/CN=" + cn, "-addext", "subjectAltName=" + ",".join("DNS:" + s for s in sans)],
        check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture
def certs(tmp_path):
    d = tmp_path
    return {
        "default": make_cert(d, "default", "default.test", ["default.test"]),
        "default_rsa": make_cert(d, "default_rsa", "default.test", ["default.test"], "rsa"),
        "example": make_cert(d, "example", "example.com", ["example.com"]),
    }


def tls_site(port, redirect_port=None):
    text = "listener 127.0.0.1:%d {\n    tls = true\n}\n" % port
    if redirect_port:
        text += "listener 127.0.0.1:%d {\n    redirect_to_https = %d\n}\n" % (redirect_port, port)
    # relative paths: taken from the config file's folder (tmp_path)
    text += """site {
    tls_certificate = default.pem
    tls_key = default.key
    tls_certificate = default_rsa.pem
    tls_key = default_rsa.key
    handler /hello hello_world
    handler /echo echo
}
site example.com {
    tls_certificate = example.pem
    tls_key = example.key
    handler /hello hello_world
}
"""
    return text


def client_ctx(**kw):
    c = ssl.create_default_context()
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def get(port, host_hdr, sni, path="/hello", ctx=None):
    ctx = ctx or client_ctx()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname=sni) as t:
            info = (t.version(), t.selected_alpn_protocol())
            t.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path.encode(), host_hdr.encode()))
            data = b""
            while True:
                chunk = t.recv(65536)
                if not chunk:
                    break
                data += chunk
            return info, data


def peer_cn(port, sni):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with client_ctx().wrap_socket(s, server_hostname=sni) as t:
            der = t.getpeercert(binary_form=True)
    out = subprocess.run(["openssl", "x509", "-inform", "der", "-noout", "-subject"], input=der,
                         capture_output=True, check=True, timeout=30).stdout.decode()
    return out.strip()


def test_https_answers_over_tls13_and_tls12_with_alpn(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port))
    ctx = client_ctx()
    ctx.set_alpn_protocols(["http/1.1"])  # h2 first: test_http2.py
    t, data = get(port, "default.test", "default.test", ctx=ctx)
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"Hello, World!")
    assert t == ("TLSv1.3", "http/1.1")
    ctx12 = client_ctx(maximum_version=ssl.TLSVersion.TLSv1_2)
    t, data = get(port, "default.test", "default.test", ctx=ctx12)
    assert t[0] == "TLSv1.2" and data.startswith(b"HTTP/1.1 200 ")


def test_keep_alive_and_pipelining_over_tls_with_curl(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port))
    url = "https://127.0.0.1:%d/hello" % port
    r = subprocess.run(["curl", "-sk", "--http1.1", url, url, url], capture_output=True, timeout=30)
    assert r.stdout == b"Hello, World!" * 3
    # a body larger than a record, echoed
    body = b"x" * 100000
    r = subprocess.run(["curl", "-sk", "--data-binary", "@-", "https://127.0.0.1:%d/echo" % port],
                       input=body, capture_output=True, timeout=30)
    assert r.returncode == 0 and body in r.stdout


def test_old_protocols_are_refused(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port))
    for flag in ("-tls1_1", "-tls1"):
        # the client's own floor lowered, so the server is what refuses
        r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, flag,
                            "-cipher", "DEFAULT@SECLEVEL=0"], input=b"", capture_output=True, timeout=30)
        assert b"no peer certificate available" in r.stdout, flag
        assert b"Cipher is (NONE)" in r.stdout or r.returncode != 0, flag
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-tls1_2"],
                       input=b"", capture_output=True, timeout=30)
    assert b"Protocol  : TLSv1.2" in r.stdout


def test_sni_picks_the_site_certificate_and_the_default_answers_without(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port))
    assert "CN = example.com" in peer_cn(port, "example.com")
    assert "CN = default.test" in peer_cn(port, None)
    assert "CN = default.test" in peer_cn(port, "unknown.test")


def test_wildcard_site_takes_its_names_in_sni_and_host(make_server, certs, tmp_path):
    """site *.example.com: SNI and Host alike pick it for every name under
    example.com that no exact site has (one label or more); the exact site
    wins for its own name; example.com itself is not under the wildcard."""
    make_cert(tmp_path, "wild", "*.example.com", ["*.example.com"])
    port = free_port()
    text = tls_site(port) + """site *.example.com {
    tls_certificate = wild.pem
    tls_key = wild.key
    response /hello {
        code = 410
    }
}
"""
    make_server(site=text)
    assert "CN = *.example.com" in peer_cn(port, "a.example.com")
    assert "CN = *.example.com" in peer_cn(port, "A.B.Example.Com")
    assert "CN = example.com" in peer_cn(port, "example.com")
    assert "CN = default.test" in peer_cn(port, "example.com.evil")
    _, data = get(port, "www.example.com:%d" % port, "www.example.com")
    assert data.startswith(b"HTTP/1.1 410 "), data  # the wildcard site's route
    _, data = get(port, "example.com", "example.com")
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"Hello, World!"), data
    # SNI under the wildcard, Host the exact site's: another site, 421
    _, data = get(port, "example.com", "www.example.com")
    assert data.startswith(b"HTTP/1.1 421 "), data


def test_two_certificate_types_on_one_site(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port))
    for sigalg, want in (("ECDSA+SHA256", b"id-ecPublicKey"), ("RSA-PSS+SHA256:RSA+SHA256", b"rsaEncryption")):
        r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-tls1_2",
                            "-sigalgs", sigalg, "-showcerts"], input=b"", capture_output=True, timeout=30)
        pem = r.stdout[r.stdout.index(b"-----BEGIN CERTIFICATE-----"):]
        pem = pem[: pem.index(b"-----END CERTIFICATE-----") + 25]
        text = subprocess.run(["openssl", "x509", "-noout", "-text"], input=pem, capture_output=True,
                              timeout=30).stdout
        assert want in text, sigalg


def test_host_naming_another_site_than_sni_gets_421(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port))
    _, data = get(port, "default.test", "example.com")
    assert data.startswith(b"HTTP/1.1 421 ")
    _, data = get(port, "example.com", "example.com")
    assert data.startswith(b"HTTP/1.1 200 ")


def test_redirect_to_https(make_server, certs):
    port, plain = free_port(), free_port()
    s = make_server(site=tls_site(port, plain))
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
                        "http://127.0.0.1:%d/a/b?x=1&y=2" % plain, "-H", "Host: example.com:%d" % plain],
                       capture_output=True, timeout=30)
    assert r.stdout.decode() == "308 https://example.com:%d/a/b?x=1&y=2" % port
    # bytes RFC 3986 does not allow are percent-encoded in the Location (a
    # raw '"' or '<' in the query is not copied), escapes already there stay
    from rawhttp import exchange
    head, _ = exchange(plain, b'GET /a%20b/c?q="<x>`&e=%41 HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n')
    assert b"\r\nLocation: https://example.com:%d/a%%20b/c?q=%%22%%3Cx%%3E%%60&e=%%41\r\n" % port in head + b"\r\n", head
    # the config's own plain listener is untouched
    r = subprocess.run(["curl", "-s", s.url + "/hello"], capture_output=True, timeout=30)
    assert r.stdout == b"Hello, World!"


def test_plain_http_on_the_tls_port_gets_a_plaintext_400_at_once(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
        assert time.monotonic() - t0 < 5
    assert data.startswith(b"HTTP/1.1 400 "), data
    assert data.endswith(b"The plain HTTP request was sent to an HTTPS port.\n")
    # curl sees the same
    r = subprocess.run(["curl", "-s", "http://127.0.0.1:%d/hello" % port], capture_output=True, timeout=30)
    assert b"sent to an HTTPS port" in r.stdout
    # and TLS still works on it
    _, data = get(port, "default.test", None)
    assert data.startswith(b"HTTP/1.1 200 ")


def test_half_a_handshake_is_closed_at_the_request_timeout(make_server, certs):
    port = free_port()
    s = make_server(site=tls_site(port), request_timeout="1s")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03")  # a ClientHello's start
        t0 = time.monotonic()
        assert c.recv(4096) == b""
        assert time.monotonic() - t0 < 4
    # meanwhile and after, others are answered
    _, data = get(port, "default.test", None)
    assert data.startswith(b"HTTP/1.1 200 ")
    assert s.proc.poll() is None


def check_config(tmp_path, text):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    return subprocess.run([str(colibri_bin()), "--check-config", "-c", str(conf)], capture_output=True,
                          timeout=30, cwd=str(tmp_path))


@pytest.mark.parametrize("text,line,msg", [
    ("listener 127.0.0.1:1 {\n tls = true\n}\nsite {\n handler / hello_world\n}\n", 2,
     "tls: a TLS listener needs a certificate"),
    ("tls_protocols = TLSv1.1 TLSv1.2\n", 1, "tls_protocols: TLSv1.1 is refused"),
    ("tls_protocols = TLSv9\n", 1, "tls_protocols: unknown protocol 'TLSv9'"),
    ("tls_ciphers = NOT-A-CIPHER\n", 1, "tls_ciphers: bad cipher list"),
    ("site {\n tls_certificate = missing.pem\n tls_key = default.key\n}\n", 2,
     "tls_certificate: %(dir)s/missing.pem: No such file or directory"),
    ("site {\n tls_certificate = default.pem\n tls_key = example.key\n}\n", 3,
     "tls_key: %(dir)s/example.key does not match the certificate"),
    ("site {\n tls_certificate = default.pem\n}\n", 2, "tls_certificate: needs a tls_key line after it"),
    ("site {\n tls_key = default.key\n}\n", 2, "tls_key: must follow a tls_certificate line"),
    ("listener 127.0.0.1:1 {\n redirect_to_https = 0\n}\n", 2, "redirect_to_https: expected a port number"),
])
def test_config_errors(tmp_path, certs, text, line, msg):
    r = check_config(tmp_path, text)
    assert r.returncode != 0
    err = r.stderr.decode()
    assert ("bad.conf:%d: " % line) in err, err
    assert (msg % {"dir": tmp_path}) in err, err


def test_a_failed_certificate_line_is_the_only_error(tmp_path, certs):
    """A TLS listener whose site's certificate cannot be read: the error
    names the tls_certificate line, with no second "a TLS listener needs a
    certificate" at the listener, which would send the operator to the
    wrong line."""
    r = check_config(tmp_path, "listener 127.0.0.1:1 {\n tls = true\n}\n"
                               "site {\n tls_certificate = missing.pem\n tls_key = default.key\n}\n")
    assert r.returncode != 0
    err = r.stderr.decode()
    assert "bad.conf:5: tls_certificate: %s/missing.pem: No such file or directory" % tmp_path in err, err
    assert "needs a certificate" not in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_make_run_config_needs_no_certificate(tmp_path):
    # the repository's colibri.conf serves plain HTTP with no TLS key
    from conftest import REPO
    r = subprocess.run([str(colibri_bin()), "--check-config", "-c", str(REPO / "colibri.conf")],
                       capture_output=True, timeout=30, cwd=str(REPO))
    assert r.returncode == 0, r.stderr


# --- the rest of the stack over TLS -------------------------------------------

def files_site(port, root):
    return tls_site(port).replace(
        "    handler /echo echo\n",
        "    handler /echo echo\n    handler /ws ws_echo\n"
        "    serve_files /files {\n        path = %s\n    }\n" % root)


def tls_conn(port, sni="default.test"):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return client_ctx().wrap_socket(s, server_hostname=sni)


def read_response(t):
    """One response with a Content-Length body from a TLS socket."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = t.recv(65536)
        assert d, buf
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
    while len(rest) < length:
        d = t.recv(65536)
        assert d
        rest += d
    return head, rest[:length], rest[length:]


def test_files_through_tls_whole_and_ranges(make_server, certs, tmp_path):
    port = free_port()
    root = tmp_path / "files"
    root.mkdir()
    big = bytes(range(256)) * 8192  # 2 MiB: leaves through the file path, not the cache's memory
    (root / "big.bin").write_bytes(big)
    make_server(site=files_site(port, root))
    r = subprocess.run(["curl", "-sk", "https://127.0.0.1:%d/files/big.bin" % port], capture_output=True, timeout=60)
    assert r.stdout == big
    r = subprocess.run(["curl", "-sk", "-r", "1000-1999999", "https://127.0.0.1:%d/files/big.bin" % port],
                       capture_output=True, timeout=60)
    assert r.stdout == big[1000:2000000]


def test_pipelined_requests_over_tls(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port))
    with tls_conn(port) as t:
        t.sendall(b"GET /hello HTTP/1.1\r\nHost: default.test\r\n\r\n" * 20)
        rest = b""
        for _ in range(20):
            buf = rest
            while b"Hello, World!" not in buf:
                d = t.recv(65536)
                assert d
                buf += d
            i = buf.index(b"Hello, World!") + len(b"Hello, World!")
            assert buf.startswith(b"HTTP/1.1 200 ")
            rest = buf[i:]


def ws_frame(opcode, payload):
    import os as _os
    key = _os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def test_websocket_over_tls_sees_bytes_the_transport_holds(make_server, certs, tmp_path):
    """Two messages in one TLS record, the first larger than the server's
    input buffer: the rest of the record sits decrypted inside OpenSSL, and
    no readiness event will announce it. The wait between messages must ask
    the transport first, or the second message is never echoed."""
    port = free_port()
    make_server(site=files_site(port, tmp_path), threads="1")
    with tls_conn(port) as t:
        t.sendall(b"GET /ws HTTP/1.1\r\nHost: default.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        buf = recv_until(t, lambda d: b"\r\n\r\n" in d, 15)
        assert buf.startswith(b"HTTP/1.1 101 "), buf
        buf = buf[buf.index(b"\r\n\r\n") + 4:]
        first, second = b"a" * 14000, b"second message"
        t.sendall(ws_frame(1, first) + ws_frame(1, second))  # one write: one record (< 16 KiB)
        want = len(first) + 4 + len(second) + 2
        t.settimeout(15)
        while len(buf) < want:
            d = t.recv(65536)
            assert d, "closed"
            buf += d
        assert first in buf and buf.endswith(second)


def test_proxy_header_before_the_handshake(make_server, certs):
    """A PROXY v1 line and the ClientHello in one segment, as HAProxy sends
    them: the header is read first, the rest feeds the handshake."""
    port = free_port()
    site = tls_site(port).replace("    tls = true\n", "    tls = true\n    proxy_protocol = true\n")
    site = site.replace("    handler /echo echo\n", "    handler /echo echo\n")
    make_server(site=site, access_log="access.log")
    inc = ssl.MemoryBIO()
    out = ssl.MemoryBIO()
    obj = client_ctx().wrap_bio(inc, out, server_hostname="default.test")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"PROXY TCP4 203.0.113.7 127.0.0.1 40000 %d\r\n" % port + hello)
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                if out.pending:
                    s.sendall(out.read())
                d = s.recv(65536)
                assert d, "closed during the handshake"
                inc.write(d)
        if out.pending:
            s.sendall(out.read())
        obj.write(b"GET /hello HTTP/1.1\r\nHost: default.test\r\nConnection: close\r\n\r\n")
        s.sendall(out.read())
        data = b""
        while True:
            try:
                data += obj.read(65536)
            except ssl.SSLWantReadError:
                d = s.recv(65536)
                if not d:
                    break
                inc.write(d)
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
            if data.endswith(b"Hello, World!"):
                break
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"Hello, World!")


def test_reload_replaces_the_certificate(make_server, certs, tmp_path):
    import signal as _signal
    port = free_port()
    s = make_server(site=tls_site(port))
    assert "CN = default.test" in peer_cn(port, None)
    # certbot's way: the files are rewritten, then SIGHUP
    make_cert(tmp_path, "default", "renewed.test", ["default.test"])
    keep = tls_conn(port)  # a connection in progress keeps its session
    n = s.stderr().count("[info] reloaded")
    s.send_signal(_signal.SIGHUP)
    deadline = time.monotonic() + 5
    while s.stderr().count("[info] reloaded") == n and time.monotonic() < deadline:
        time.sleep(0.02)
    assert s.stderr().count("[info] reloaded") > n, s.stderr()
    time.sleep(0.1)
    assert "CN = renewed.test" in peer_cn(port, None)
    keep.sendall(b"GET /hello HTTP/1.1\r\nHost: default.test\r\nConnection: close\r\n\r\n")
    head, body, _ = read_response(keep)
    assert head.startswith(b"HTTP/1.1 200 ") and body == b"Hello, World!"
    keep.close()


def test_reload_under_load_fails_no_request(make_server, certs, tmp_path):
    """Certificates replaced and reloaded three times while four clients
    send requests without a pause (new connections and keep-alive ones):
    not one request fails, and handshakes after each reload see the new
    certificate. Bounded: 3 reloads, at most 10 s."""
    import signal as _signal
    import threading
    port = free_port()
    s = make_server(site=tls_site(port))
    stop, failures, done = threading.Event(), [], [0]

    def client(keep_alive):
        t = None
        while not stop.is_set():
            try:
                if t is None:
                    t = tls_conn(port)
                t.sendall(b"GET /hello HTTP/1.1\r\nHost: default.test\r\n%s\r\n"
                          % (b"" if keep_alive else b"Connection: close\r\n"))
                head, body, _ = read_response(t)
                assert head.startswith(b"HTTP/1.1 200 ") and body == b"Hello, World!", head
                done[0] += 1
                if not keep_alive:
                    t.close()
                    t = None
            except Exception as e:  # noqa: BLE001 - every failure counts
                failures.append(repr(e))
                t = None
        if t is not None:
            t.close()

    threads = [threading.Thread(target=client, args=(i % 2 == 0,)) for i in range(4)]
    for th in threads:
        th.start()
    try:
        deadline = time.monotonic() + 10 * TIME_SCALE
        for i in range(3):
            time.sleep(0.3)
            make_cert(tmp_path, "default", "renewed%d.test" % i, ["default.test"])
            n = s.stderr().count("[info] reloaded")
            s.send_signal(_signal.SIGHUP)
            while s.stderr().count("[info] reloaded") == n and time.monotonic() < deadline:
                time.sleep(0.02)
            assert s.stderr().count("[info] reloaded") > n, s.stderr()
            # each worker takes the new config at its next turn
            while "CN = renewed%d.test" % i not in peer_cn(port, None) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "CN = renewed%d.test" % i in peer_cn(port, None)
        time.sleep(0.3)
    finally:
        stop.set()
        for th in threads:
            th.join(10)
    assert not failures, failures[:5]
    assert done[0] > 20, done


def test_tls_in_the_sandbox(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port), sandbox="true")
    for _ in range(3):
        _, data = get(port, "default.test", "default.test")
        assert data.startswith(b"HTTP/1.1 200 ")


def test_a_reload_with_a_bad_key_keeps_the_old_certificate(make_server, certs, tmp_path):
    import signal as _signal
    port = free_port()
    s = make_server(site=tls_site(port))
    s.config.write_text(s.config.read_text().replace("tls_key = example.key", "tls_key = default.key"))
    n = s.stderr().count("reload failed: ")
    s.send_signal(_signal.SIGHUP)
    deadline = time.monotonic() + 5
    while s.stderr().count("reload failed: ") == n and time.monotonic() < deadline:
        time.sleep(0.02)
    err = s.stderr()
    assert err.count("reload failed: ") > n, err
    assert "tls_key: %s/default.key does not match the certificate" % tmp_path in err
    assert "CN = example.com" in peer_cn(port, "example.com")
    _, data = get(port, "example.com", "example.com")
    assert data.startswith(b"HTTP/1.1 200 ")


def test_many_half_handshakes_do_not_stop_the_thread(make_server, certs):
    """The slowloris test over TLS: 1,000 connections (the issue's count)
    that send half a ClientHello and stop; one thread still answers /hello
    at once. A thread stuck on one of them would answer only when
    request_timeout (20 s) ends it: the bound of 10 s leaves room for a slow
    handshake behind 1,000 accepts under TSan (5.2 s seen in make test), and
    still half of what a stuck thread takes. The server inherits the raised
    fd limit."""
    from test_concurrency import raise_nofile
    assert raise_nofile(1000 + 300) >= 1000 + 100, "cannot raise RLIMIT_NOFILE"
    port = free_port()
    make_server(site=tls_site(port), threads="1", request_timeout="20s")
    stalled = []
    try:
        for _ in range(1000):
            c = socket.create_connection(("127.0.0.1", port), timeout=10)
            c.sendall(b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03")
            stalled.append(c)
        t0 = time.monotonic()
        _, data = get(port, "default.test", None)
        assert data.startswith(b"HTTP/1.1 200 ")
        assert time.monotonic() - t0 < 10
    finally:
        for c in stalled:
            c.close()


def s_client(port, *args):
    req = b"GET /hello HTTP/1.1\r\nHost: default.test\r\nConnection: close\r\n\r\n"
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-ign_eof", *args],
                       input=req, capture_output=True, timeout=30)
    return r.stdout


@pytest.mark.parametrize("version", ["-tls1_3", "-tls1_2"])
def test_resumption_with_a_ticket(make_server, certs, tmp_path, version):
    port = free_port()
    make_server(site=tls_site(port))
    sess = str(tmp_path / "sess.pem")
    out = s_client(port, version, "-sess_out", sess)
    assert b"New, TLSv1." in out and b"Hello, World!" in out
    out = s_client(port, version, "-sess_in", sess)
    assert b"Reused, TLSv1." in out and b"Hello, World!" in out


def test_a_resumed_tls13_handshake_gets_a_new_ticket(make_server, certs, tmp_path):
    """TLS 1.3 tickets are for one use (RFC 8446 C.4): each resumed
    handshake carries a fresh ticket, so a client resumes from ticket to
    ticket for ever (a chain of five here), not twice and then a full
    handshake."""
    port = free_port()
    make_server(site=tls_site(port))
    sess = [str(tmp_path / ("s%d.pem" % i)) for i in range(6)]
    assert b"New, TLSv1.3" in s_client(port, "-tls1_3", "-sess_out", sess[0])
    for i in range(1, 6):
        out = s_client(port, "-tls1_3", "-sess_in", sess[i - 1], "-sess_out", sess[i], "-msg")
        assert b"Reused, TLSv1.3" in out and b"Hello, World!" in out, i
        assert b"NewSessionTicket" in out, i
        assert open(sess[i], "rb").read() != open(sess[i - 1], "rb").read()


def test_tickets_off(make_server, certs, tmp_path):
    port = free_port()
    make_server(site=tls_site(port), tls_session_tickets="false")
    sess = str(tmp_path / "sess.pem")
    out = s_client(port, "-tls1_3", "-sess_out", sess)
    assert b"Hello, World!" in out
    # TLS 1.3 without a ticket: no session for the client to keep at all
    assert not os.path.exists(sess)
    out = s_client(port, "-tls1_2", "-sess_out", sess)
    assert b"Hello, World!" in out
    if os.path.exists(sess):  # a session without ticket or id cannot resume
        out = s_client(port, "-tls1_2", "-sess_in", sess)
        assert b"Reused," not in out and b"Hello, World!" in out


def test_tickets_key_must_be_a_boolean(tmp_path, certs):
    r = check_config(tmp_path, "tls_session_tickets = sometimes\n")
    assert r.returncode != 0 and "bad.conf:1: tls_session_tickets:" in r.stderr.decode()


def kernel_has_tls_ulp():
    try:
        return "tls" in open("/proc/sys/net/ipv4/tcp_available_ulp").read().split()
    except OSError:
        return False


def test_ktls_decision_is_logged_once_and_serving_works(make_server, certs):
    port = free_port()
    s = make_server(site=tls_site(port), error_log_level="info")
    want = "kTLS: the kernel has the tls ULP" if kernel_has_tls_ulp() else "kTLS: the kernel offers no tls ULP"
    deadline = time.monotonic() + 5 * TIME_SCALE  # written as the server starts, maybe after it listens
    while want not in s.stderr() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert s.stderr().count(want) == 1, s.stderr()
    r = subprocess.run(["curl", "-sk", "https://127.0.0.1:%d/hello" % port], capture_output=True, timeout=30)
    assert r.stdout == b"Hello, World!"


def test_ktls_off(make_server, certs, tmp_path):
    port = free_port()
    s = make_server(site=tls_site(port), error_log_level="info", ktls="off")
    deadline = time.monotonic() + 5 * TIME_SCALE
    while "kTLS: off" not in s.stderr() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "kTLS: off (ktls = off)" in s.stderr()
    r = check_config(tmp_path, "ktls = sometimes\n")
    assert r.returncode != 0 and "bad.conf:1: ktls: expected 'auto' or 'off'" in r.stderr.decode()


def make_ocsp(d):
    """A CA, a leaf it signed, and the CA's DER OCSP response for the leaf."""
    def ossl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60, cwd=str(d))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    ossl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=testca")
    ossl("req", *ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=default.test")
    ossl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "leaf.pem", "-days", "2")
    (d / "index.txt").write_text("")
    ossl("ocsp", "-issuer", "ca.pem", "-cert", "leaf.pem", "-reqout", "req.der", "-no_nonce")
    ossl("ocsp", "-index", "index.txt", "-rsigner", "ca.pem", "-rkey", "ca.key", "-CA", "ca.pem",
         "-reqin", "req.der", "-respout", "resp.der", "-ndays", "1")


def test_ocsp_staple_in_the_handshake(make_server, tmp_path):
    make_ocsp(tmp_path)
    port = free_port()
    site = ("listener 127.0.0.1:%d {\n    tls = true\n}\nsite {\n    tls_certificate = leaf.pem\n"
            "    tls_key = leaf.key\n    tls_ocsp_staple = resp.der\n    handler /hello hello_world\n}\n" % port)
    make_server(site=site)
    out = s_client(port, "-status")
    assert b"OCSP Response Status: successful" in out, out
    assert b"Hello, World!" in out
    # without status_request, none is sent
    out = s_client(port)
    assert b"OCSP response:" not in out or b"no response sent" in out


@pytest.mark.parametrize("text,msg", [
    ("site {\n tls_ocsp_staple = resp.der\n}\n", "tls_ocsp_staple: needs a tls_certificate line before it"),
    ("site {\n tls_certificate = default.pem\n tls_key = default.key\n tls_ocsp_staple = default.pem\n}\n",
     "default.pem: not a DER OCSP response"),
    ("site {\n tls_certificate = default.pem\n tls_key = default.key\n tls_ocsp_staple = none.der\n}\n",
     "none.der: No such file or directory"),
])
def test_ocsp_staple_errors(tmp_path, certs, text, msg):
    r = check_config(tmp_path, text)
    assert r.returncode != 0 and msg in r.stderr.decode(), r.stderr


def test_two_instances_with_one_ticket_key_file_resume_each_other(make_server, certs, tmp_path):
    (tmp_path / "ticket.key").write_bytes(os.urandom(80))
    a, b = free_port(), free_port()
    make_server(site=tls_site(a), tls_ticket_key_file="ticket.key")
    make_server(site=tls_site(b), tls_ticket_key_file="ticket.key")
    sess = str(tmp_path / "sess.pem")
    assert b"New, TLSv1.3" in s_client(a, "-tls1_3", "-sess_out", sess)
    out = s_client(b, "-tls1_3", "-sess_in", sess)
    assert b"Reused, TLSv1.3" in out and b"Hello, World!" in out
    # without the shared file, each process has keys of its own
    c = free_port()
    make_server(site=tls_site(c))
    out = s_client(c, "-tls1_3", "-sess_in", sess)
    assert b"Reused," not in out and b"Hello, World!" in out


def test_ticket_key_rotation(make_server, certs, tmp_path):
    """tls_ticket_rotate = 2s: a ticket still resumes within one rotation
    (the previous key decrypts), not after two."""
    port = free_port()
    make_server(site=tls_site(port), tls_ticket_rotate="2s")
    sess = str(tmp_path / "sess.pem")
    s_client(port, "-tls1_3", "-sess_out", sess)
    time.sleep(2.5)
    assert b"Reused, TLSv1.3" in s_client(port, "-tls1_3", "-sess_in", sess)
    time.sleep(2.5)
    out = s_client(port, "-tls1_3", "-sess_in", sess)
    assert b"Reused," not in out and b"Hello, World!" in out


@pytest.mark.parametrize("content,msg", [
    (b"x" * 79, "must hold exactly 80 bytes (it has 79)"),
    (b"x" * 81, "must hold exactly 80 bytes (it has more than 80)"),
])
def test_ticket_key_file_errors(tmp_path, certs, content, msg):
    (tmp_path / "t.key").write_bytes(content)
    r = check_config(tmp_path, "tls_ticket_key_file = t.key\n")
    assert r.returncode != 0 and "bad.conf:1: tls_ticket_key_file: " in r.stderr.decode()
    assert msg in r.stderr.decode(), r.stderr


def test_server_sent_events_over_tls(make_server, certs):
    """A stream whose events are written across waits (conn_sleep between
    them): each leaves through the TLS path as it is made."""
    port = free_port()
    make_server(site=tls_site(port).replace("    handler /echo echo\n",
                                            "    handler /echo echo\n    handler /ticks sse_ticks\n"))
    t0 = time.monotonic()
    r = subprocess.run(["curl", "-skN", "https://127.0.0.1:%d/ticks?count=5&interval=100" % port],
                       capture_output=True, timeout=30)
    assert r.returncode == 0
    events = [b for b in r.stdout.split(b"\n\n") if b.strip()]
    assert len(events) == 5 and b"data: 5" in events[-1], r.stdout
    assert time.monotonic() - t0 >= 0.4


def test_upload_body_over_tls_with_expect_continue(make_server, certs, tmp_path):
    port = free_port()
    make_server(site=tls_site(port), max_request_body="8M")
    body = os.urandom(3 * 1024 * 1024)
    (tmp_path / "up.bin").write_bytes(body)
    r = subprocess.run(["curl", "-sk", "-H", "Expect: 100-continue", "--data-binary", "@up.bin",
                        "https://127.0.0.1:%d/echo" % port], capture_output=True, timeout=60,
                       cwd=str(tmp_path))
    assert r.returncode == 0 and body in r.stdout


def test_log_format_tls_fields(make_server, certs, tmp_path):
    """$ssl_protocol, $ssl_cipher, $ssl_server_name and $ssl_session_reused
    in a log format: what each connection negotiated, "-" on a plain one."""
    from test_logs import wait_lines
    port, log = free_port(), tmp_path / "access.log"
    s = make_server(site=tls_site(port), access_log=str(log),
                    log_format="$ssl_protocol $ssl_cipher $ssl_server_name $ssl_session_reused $uri")
    sess = str(tmp_path / "sess.pem")
    assert b"Hello, World!" in s_client(port, "-tls1_2", "-sess_out", sess, "-servername", "default.test",
                                        "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256")
    assert b"Reused, TLSv1.2" in s_client(port, "-tls1_2", "-sess_in", sess, "-servername", "default.test")
    (v, _), data = get(port, "example.com", "example.com")
    assert v == "TLSv1.3" and data.startswith(b"HTTP/1.1 200 ")
    with s.conn() as c:  # the plain listener
        c.send(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert c.read_response().status == 200
    lines = wait_lines(log, 4)
    # each worker buffers its own lines: in any order
    assert sorted(lines) == [
        "- - - - /hello",
        "TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256 default.test . /hello",
        "TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256 default.test r /hello",
        "TLSv1.3 TLS_AES_256_GCM_SHA384 example.com . /hello",
    ], lines


def test_version_names_the_tls_library(tmp_path):
    out = subprocess.run([str(colibri_bin()), "--version"], capture_output=True, timeout=10).stdout
    assert b" tls\n" in out and b"\ntls: OpenSSL 3." in out, out
    assert re.search(rb"\nlibraries: nghttp2 1\.\d+\.\d+, PCRE2 10\.\d+", out), out
    assert re.search(rb"features: .*\bhttp2\b.*\brewrite\b", out), out


def test_connection_close_ends_with_close_notify(make_server, certs):
    """An answer with Connection: close ends with a close_notify alert, not a
    bare FIN: a client that sees a truncated TLS stream (unexpected EOF)
    must drop the session (OpenSSL marks it not resumable)."""
    port = free_port()
    make_server(site=tls_site(port))
    for version in ("-tls1_3", "-tls1_2"):
        out = s_client(port, version, "-msg")
        assert b"Hello, World!" in out
        assert b"Alert" in out and b"close_notify" in out, out[-600:]


def test_metrics_count_tls_handshakes(make_server, certs, tmp_path):
    """colibri_tls_handshakes_total: full, resumed (a ticket) and failed
    handshakes, as the metrics section shows them (promtool accepts it)."""
    import re as _re
    import shutil as _shutil
    port = free_port()
    site = tls_site(port).replace("    handler /echo echo\n", "    handler /echo echo\n    metrics /metrics {\n    }\n", 1)
    s = make_server(site=site)

    def counts():
        with s.conn() as c:
            c.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            text = c.read_response().body.decode()
        got = dict(_re.findall(r'^colibri_tls_handshakes_total\{result="(\w+)"\} (\d+)$', text, _re.M))
        return {k: int(v) for k, v in got.items()}, text

    before, _ = counts()
    assert before == {"full": 0, "resumed": 0, "failed": 0}, before
    sess = str(tmp_path / "sess.pem")
    assert b"Hello, World!" in s_client(port, "-tls1_3", "-sess_out", sess)
    assert b"Reused, TLSv1.3" in s_client(port, "-tls1_3", "-sess_in", sess)
    assert b"Hello, World!" in s_client(port, "-tls1_2")
    # a handshake that fails: TLS 1.0 only, which the server refuses
    subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-tls1", "-cipher", "DEFAULT@SECLEVEL=0"],
                   input=b"", capture_output=True, timeout=30)
    deadline = time.monotonic() + 5 * TIME_SCALE
    while True:
        got, text = counts()
        if got == {"full": 2, "resumed": 1, "failed": 1} or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert got == {"full": 2, "resumed": 1, "failed": 1}, got
    if _shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stdout + p.stderr


# --- details of the contract: expiry, unreadable files, what a reload reads again,
# --- the port 443 redirect, colibri_req_is_secure() ----------------------------------

def reload_and_wait(s):
    """SIGHUP, then the server's "reloaded" line (each worker takes the new
    configuration at its next turn: callers poll for what they expect)."""
    import signal as _signal
    n = s.stderr().count("[info] reloaded")
    s.send_signal(_signal.SIGHUP)
    deadline = time.monotonic() + 5 * TIME_SCALE
    while s.stderr().count("[info] reloaded") == n and time.monotonic() < deadline:
        time.sleep(0.02)
    assert s.stderr().count("[info] reloaded") > n, s.stderr()


def poll(fn, seconds=5):
    """fn() until it is true or the time is up; its last value."""
    deadline = time.monotonic() + seconds * TIME_SCALE
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.05)


@pytest.mark.skipif(shutil.which("faketime") is None, reason="needs faketime")
def test_an_expired_certificate_warns_and_still_serves(make_server, certs, tmp_path):
    """A certificate whose notAfter is past: a warning naming its line, and
    the server starts and serves it (the client decides what to make of it)."""
    subprocess.run(["faketime", "-3 days", "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", "old.key", "-out", "old.pem",
                    "-days", "1", "-subj", "/CN=expired.test"],
                   check=True, capture_output=True, timeout=60, cwd=str(tmp_path))
    r = subprocess.run(["openssl", "x509", "-in", str(tmp_path / "old.pem"), "-noout", "-checkend", "0"],
                       capture_output=True, timeout=30)
    assert r.returncode == 1, r.stdout  # it has expired indeed
    warning = "tls_certificate: %s/old.pem has expired (loaded all the same)" % tmp_path
    r = check_config(tmp_path, "site {\n tls_certificate = old.pem\n tls_key = old.key\n}\n")
    assert r.returncode == 0, r.stderr
    assert "[warn] %s/bad.conf:2: %s" % (tmp_path, warning) in r.stderr.decode(), r.stderr
    # a valid one says nothing
    r = check_config(tmp_path, "site {\n tls_certificate = default.pem\n tls_key = default.key\n}\n")
    assert r.returncode == 0 and b"expired" not in r.stderr, r.stderr
    port = free_port()
    site = ("listener 127.0.0.1:%d {\n    tls = true\n}\nsite {\n    tls_certificate = old.pem\n"
            "    tls_key = old.key\n    handler /hello hello_world\n}\n" % port)
    s = make_server(site=site)
    assert s.stderr().count(warning) == 1, s.stderr()
    assert "CN = expired.test" in peer_cn(port, None)
    _, data = get(port, "x", None)
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"Hello, World!")


@pytest.mark.parametrize("kind,msg", [("dir", "Is a directory"), ("fifo", "not a regular file")], ids=["dir", "fifo"])
@pytest.mark.parametrize("key,text,line", [
    ("tls_certificate", "site {\n tls_certificate = X\n tls_key = default.key\n}\n", 2),
    ("tls_key", "site {\n tls_certificate = default.pem\n tls_key = X\n}\n", 3),
    ("tls_ocsp_staple", "site {\n tls_certificate = default.pem\n tls_key = default.key\n tls_ocsp_staple = X\n}\n", 4),
    ("tls_ticket_key_file", "tls_ticket_key_file = X\n", 1),
], ids=["certificate", "key", "staple", "ticket_key"])
def test_an_unreadable_tls_file_is_a_config_error(tmp_path, certs, kind, msg, key, text, line):
    """A path that exists but is no file to read: a directory (which root,
    as the tests run, would otherwise "read" as empty: "not a PEM
    certificate chain", "it has 0 bytes") or a FIFO (whose open blocked the
    load for ever). Mode 000 stops no root, so these stand for it."""
    path = tmp_path / "X"
    if kind == "dir":
        path.mkdir()
    else:
        os.mkfifo(str(path))
    r = check_config(tmp_path, text)
    assert r.returncode != 0
    assert "bad.conf:%d: %s: %s/X: %s" % (line, key, tmp_path, msg) in r.stderr.decode(), r.stderr


def test_reload_reads_the_ticket_key_file_again(make_server, certs, tmp_path):
    """tls_ticket_key_file is read at each reload: a new key there, and a
    ticket made under the old one no longer resumes ("New"), while tickets
    of the new key do; the same key rewritten, and they still resume."""
    key = tmp_path / "ticket.key"
    key.write_bytes(os.urandom(80))
    port = free_port()
    s = make_server(site=tls_site(port), tls_ticket_key_file="ticket.key")
    old, new = str(tmp_path / "old.pem"), str(tmp_path / "new.pem")
    assert b"New, TLSv1.3" in s_client(port, "-tls1_3", "-sess_out", old)
    assert b"Reused, TLSv1.3" in s_client(port, "-tls1_3", "-sess_in", old)
    key.write_bytes(os.urandom(80))
    reload_and_wait(s)
    out = poll(lambda: (lambda o: o if b"New, TLSv1.3" in o else None)(s_client(port, "-tls1_3", "-sess_in", old)))
    assert out and b"Hello, World!" in out, "a ticket of the replaced key still resumes"
    assert b"New, TLSv1.3" in s_client(port, "-tls1_3", "-sess_out", new)
    assert b"Reused, TLSv1.3" in s_client(port, "-tls1_3", "-sess_in", new)
    # the same key written again, and a new certificate to see the reload land
    key.write_bytes(key.read_bytes())
    make_cert(tmp_path, "default", "renewed.test", ["default.test"])
    reload_and_wait(s)
    assert poll(lambda: "CN = renewed.test" in peer_cn(port, None))
    for _ in range(3):  # whichever worker takes it
        out = s_client(port, "-tls1_3", "-sess_in", new)
        assert b"Reused, TLSv1.3" in out and b"Hello, World!" in out


def test_reload_reads_the_ocsp_staple_again(make_server, tmp_path):
    """tls_ocsp_staple is read at each reload: after the responder's new
    answer is written over the file, new handshakes carry it."""
    make_ocsp(tmp_path)
    port = free_port()
    site = ("listener 127.0.0.1:%d {\n    tls = true\n}\nsite {\n    tls_certificate = leaf.pem\n"
            "    tls_key = leaf.key\n    tls_ocsp_staple = resp.der\n    handler /hello hello_world\n}\n" % port)
    s = make_server(site=site)

    def next_update(text):
        m = re.search(rb"Next Update: ([^\n]+)", text)
        return m and m.group(1).strip()

    def on_file():
        return next_update(subprocess.run(["openssl", "ocsp", "-respin", "resp.der", "-resp_text", "-noverify"],
                                          capture_output=True, check=True, timeout=30, cwd=str(tmp_path)).stdout)

    first = on_file()
    assert first and next_update(s_client(port, "-status")) == first
    # a new response from the responder, valid longer: another Next Update
    subprocess.run(["openssl", "ocsp", "-index", "index.txt", "-rsigner", "ca.pem", "-rkey", "ca.key", "-CA",
                    "ca.pem", "-reqin", "req.der", "-respout", "resp.der", "-ndays", "5"],
                   check=True, capture_output=True, timeout=60, cwd=str(tmp_path))
    second = on_file()
    assert second and second != first
    reload_and_wait(s)
    assert poll(lambda: next_update(s_client(port, "-status")) == second), s_client(port, "-status")
    out = s_client(port, "-status")
    assert b"OCSP Response Status: successful" in out and b"Hello, World!" in out


def test_redirect_to_https_port_443_is_left_out(make_server):
    """redirect_to_https = 443: the Location names no port (https:// means
    443), whatever port the Host had; a bracketed IPv6 host keeps its
    brackets. Only the number matters: no listener on 443 is needed."""
    plain = free_port()
    make_server(site="listener 127.0.0.1:%d {\n    redirect_to_https = 443\n}\n"
                     "site {\n    handler /hello hello_world\n}\n" % plain)
    for host, want in (("example.com:%d" % plain, "https://example.com/a/b?x=1&y=2"),
                       ("example.com", "https://example.com/a/b?x=1&y=2"),
                       ("[::1]:%d" % plain, "https://[::1]/a/b?x=1&y=2")):
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
                            "http://127.0.0.1:%d/a/b?x=1&y=2" % plain, "-H", "Host: " + host],
                           capture_output=True, timeout=30)
        assert r.stdout.decode() == "308 " + want, host


def test_req_is_secure_over_tls_and_not_over_plain(make_server, certs, greet_so):  # noqa: F811
    """colibri_req_is_secure() as a module's handler sees it: true over TLS
    (HTTP/1.1 and h2 alike), false on the plain listener of the same
    server; and the proxy's X-Forwarded-Proto, which comes from it."""
    port = free_port()
    site = "module %s\n" % greet_so + tls_site(port).replace(
        "    handler /echo echo\n", "    handler /echo echo\n    handler /secure is_secure\n")
    s = make_server(site=site)
    _, data = get(port, "default.test", "default.test", path="/secure")
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"\r\n\r\nsecure\n"), data
    r = subprocess.run(["curl", "-sk", "--http2", "-w", " %{http_version}", "https://127.0.0.1:%d/secure" % port],
                       capture_output=True, timeout=30)
    assert r.stdout == b"secure\n 2", r.stdout
    with s.conn() as c:
        c.send(b"GET /secure HTTP/1.1\r\nHost: default.test\r\nConnection: close\r\n\r\n")
        resp = c.read_response()
    assert resp.status == 200 and resp.body == b"plain\n"


def test_proxy_says_https_to_the_upstream_over_tls(make_server, certs, upstreams):  # noqa: F811
    import json
    up = upstreams()
    port = free_port()
    site = tls_site(port).replace("    handler /echo echo\n",
                                  "    handler /echo echo\n    proxy /api {\n        to = http://%s\n    }\n" % up.addr)
    s = make_server(site=site)
    _, data = get(port, "default.test", "default.test", path="/api/echo")
    assert data.startswith(b"HTTP/1.1 200 "), data
    h = {k.lower(): v for k, v in json.loads(data.split(b"\r\n\r\n", 1)[1])["headers"]}
    assert h["x-forwarded-proto"] == "https", h
    with s.conn() as c:
        c.send(b"GET /api/echo HTTP/1.1\r\nHost: default.test\r\nConnection: close\r\n\r\n")
        resp = c.read_response()
    h = {k.lower(): v for k, v in json.loads(resp.body)["headers"]}
    assert h["x-forwarded-proto"] == "http", h


def test_a_bad_cipher_list_is_one_error_not_three(tmp_path, certs):
    """A bad tls_ciphers line is reported once, at its line: the
    certificates and the TLS listener after it are not failed again on it
    ("tls_certificate: bad cipher list", "a TLS listener needs a
    certificate")."""
    r = check_config(tmp_path, "listener 127.0.0.1:1 {\n tls = true\n}\ntls_ciphers = NOT-A-CIPHER\n"
                               "site {\n tls_certificate = default.pem\n tls_key = default.key\n}\n")
    assert r.returncode != 0
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "bad.conf:4: tls_ciphers: bad cipher list 'NOT-A-CIPHER'" in lines[0], lines


def handshake(port, *args):
    """s_client's output for a TLS handshake with args (no request)."""
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-servername", "default.test",
                        *args], input=b"", capture_output=True, timeout=30)
    return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def test_default_ciphers_groups_and_no_renegotiation(make_server, certs):
    """Mozilla "intermediate" for TLS 1.2 by default (ECDHE with AES-GCM or
    ChaCha20 only: no CBC, no RSA key exchange), X25519 and P-256 groups
    only, and a client's renegotiation refused."""
    port = free_port()
    make_server(site=tls_site(port))
    out = handshake(port, "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256")
    assert "Cipher is ECDHE-ECDSA-AES128-GCM-SHA256" in out, out
    for outside in ("ECDHE-ECDSA-AES128-SHA", "AES128-GCM-SHA256", "ECDHE-RSA-AES256-SHA384"):
        out = handshake(port, "-tls1_2", "-cipher", outside)
        assert "Cipher is (NONE)" in out or "handshake failure" in out, (outside, out)
    for group, ok in (("X25519", True), ("P-256", True), ("P-384", False), ("ffdhe2048", False)):
        out = handshake(port, "-tls1_3", "-groups", group)
        assert ("New, TLSv1.3, Cipher is TLS_" in out) == ok, (group, out)
    # "R" asks s_client to renegotiate (TLS 1.2): the server refuses it
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-tls1_2"],
                       input=b"R\n", capture_output=True, timeout=30)
    out = (r.stdout + r.stderr).decode(errors="replace")
    assert "RENEGOTIATING" in out, out
    assert "no renegotiation" in out, out  # the server's no_renegotiation alert


def test_tls_ciphers_takes_effect(make_server, certs):
    port = free_port()
    make_server(site=tls_site(port), tls_ciphers="ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305")
    assert "Cipher is ECDHE-ECDSA-CHACHA20-POLY1305" in handshake(port, "-tls1_2")
    out = handshake(port, "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256")
    assert "Cipher is (NONE)" in out or "handshake failure" in out, out


@pytest.mark.skipif(not shutil.which("strace") or bool(os.environ.get("COLIBRI_WRAPPER")),
                    reason="strace on the server's own pid")
def test_one_write_per_answer_over_tls(make_server, certs, tmp_path):
    """An answer that fits a record leaves in one SSL_write, head and body
    together (one write() a request, never one per header line): 30
    keep-alive /hello and 30 cached 4 KiB files on one TLS connection,
    the server's threads traced."""
    import signal
    port = free_port()
    root = tmp_path / "files"
    root.mkdir()
    (root / "4k.bin").write_bytes(os.urandom(4096))
    srv = make_server(site=files_site(port, root), threads="1")
    t = tls_conn(port)
    req = lambda path: ("GET %s HTTP/1.1\r\nHost: default.test\r\n\r\n" % path).encode()
    for path in ("/hello", "/files/4k.bin"):  # the handshake's tickets, the cache filled
        t.sendall(req(path))
        read_response(t)
    out = tmp_path / "strace.txt"
    tr = subprocess.Popen(["strace", "-f", "-c", "-o", str(out), "-e", "trace=write,writev,sendmsg,sendto",
                           "-p", str(srv.proc.pid)], stderr=subprocess.PIPE)
    try:
        time.sleep(1.0 * TIME_SCALE)  # attached to every thread
        if tr.poll() is not None:
            pytest.skip("strace cannot attach here: %s" % tr.stderr.read().decode())
        for i in range(60):
            t.sendall(req("/hello" if i % 2 else "/files/4k.bin"))
            head, body, rest = read_response(t)
            assert head.startswith(b"HTTP/1.1 200") and not rest
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(10)
    t.close()
    text = out.read_text()
    calls = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", text, re.M)}
    calls.pop("total", None)
    assert sum(calls.values()) == 60, text
