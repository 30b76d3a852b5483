"""https:// upstreams (README, "Reverse proxy": tls_verify, tls_ca,
tls_server_name): colibri proxies to a Python HTTPS server started by the
test, with certificates from the test's own CA made by openssl in
tmp_path. The upstream counts its TLS connections, the resumed sessions
and the SNI names it saw. Loopback only; every wait bounded."""

import hashlib
import http.client
import http.server
import os
import shutil
import ssl
import subprocess
import threading

import pytest

from conftest import free_port
from test_config_errors import check, listener, run_config

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def pki(tmp_path):
    """ca.pem; good (upstream.test and 127.0.0.1), named (upstream.test
    only), both signed by the CA; untrusted: self-signed for 127.0.0.1."""
    d = tmp_path / "pki"
    d.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"), "-days", "2",
            "-subj", "/CN=colibri test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")
    for name, san in (("good", "DNS:upstream.test,IP:127.0.0.1"), ("named", "DNS:upstream.test")):
        openssl("req", "-new", *ec, "-keyout", str(d / (name + ".key")), "-out", str(d / (name + ".csr")),
                "-subj", "/CN=upstream.test")
        (d / (name + ".ext")).write_text("subjectAltName=%s\nbasicConstraints=CA:FALSE\n" % san)
        openssl("x509", "-req", "-in", str(d / (name + ".csr")), "-CA", str(d / "ca.pem"), "-CAkey",
                str(d / "ca.key"), "-CAcreateserial", "-days", "2", "-extfile", str(d / (name + ".ext")),
                "-out", str(d / (name + ".pem")))
    openssl("req", "-x509", *ec, "-keyout", str(d / "untrusted.key"), "-out", str(d / "untrusted.pem"),
            "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")
    return d


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if self.path.endswith("/close"):
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        up = self.server.up
        with up.lock:
            up.requests += 1
            up.paths.append(self.path)
            if getattr(self.connection, "session_reused", False):
                up.resumed += 1
        self.answer(("GET %s host=%s" % (self.path, self.headers.get("Host"))).encode())

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = b""
        while len(data) < n:
            b = self.rfile.read(n - len(data))
            if not b:
                break
            data += b
        self.answer(hashlib.sha256(data).hexdigest().encode())


class TLSUpstream:
    """An HTTPS upstream with cert's pair (None: plain HTTP)."""

    def __init__(self, pki, cert):
        self.lock = threading.Lock()
        self.connections = self.requests = self.resumed = 0
        self.sni = []
        self.paths = []
        self.pki = pki
        if cert:
            ctx = self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(pki / (cert + ".pem")), str(pki / (cert + ".key")))
            ctx.set_alpn_protocols(["http/1.1"])
            ctx.sni_callback = lambda sock, name, c: self.sni.append(name) and None
        up = self

        class Srv(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self):
                sock, addr = self.socket.accept()
                sock.settimeout(10)
                with up.lock:
                    up.connections += 1
                return sock, addr

        self.srv = Srv(("127.0.0.1", free_port()), Handler)
        self.srv.up = self
        if cert:
            self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.start()

    def use(self, cert):
        """New handshakes present cert's pair."""
        self.ctx.load_cert_chain(str(self.pki / (cert + ".pem")), str(self.pki / (cert + ".key")))

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()
        self.thread.join(10)


@pytest.fixture
def tls_upstream(pki):
    made = []

    def make(cert="good"):
        u = TLSUpstream(pki, cert)
        made.append(u)
        return u

    yield make
    for u in made:
        u.stop()


def front(make_server, up, host="127.0.0.1", **keys):
    body = "site {\n    proxy /api {\n        to = https://%s:%d\n" % (host, up.port)
    for k, v in keys.items():
        body += "        %s = %s\n" % (k, v)
    return make_server(site=body + "    }\n}\n", threads="1")


def request(srv, path, method="GET", body=None, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", srv.port, timeout=15)
    c.request(method, path, body=body)
    r = c.getresponse()
    data = r.read()
    if not conn:
        c.close()
    return r, data


def test_get_and_post_over_https(make_server, tls_upstream, pki):
    up = tls_upstream("good")
    srv = front(make_server, up, tls_ca=pki / "ca.pem")
    r, body = request(srv, "/api/x?y=1")
    assert r.status == 200, body
    assert body == b"GET /api/x?y=1 host=127.0.0.1:%d" % up.port
    data = os.urandom(3 * 1024 * 1024 + 17)
    r, body = request(srv, "/api/upload", "POST", data)
    assert r.status == 200
    assert body.decode() == hashlib.sha256(data).hexdigest()


def test_kept_connection_is_one_tls_connection(make_server, tls_upstream, pki):
    up = tls_upstream("good")
    srv = front(make_server, up, tls_ca=pki / "ca.pem")
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=15)
    for i in range(6):
        r, body = request(srv, "/api/k%d" % i, conn=c)
        assert r.status == 200 and body.startswith(b"GET /api/k%d" % i)
    r, body = request(srv, "/api/p", "POST", b"x" * 5000, conn=c)
    assert r.status == 200 and body.decode() == hashlib.sha256(b"x" * 5000).hexdigest()
    c.close()
    for i in range(3):  # other client connections: the same kept upstream one
        assert request(srv, "/api/again")[0].status == 200
    assert up.requests == 9
    assert up.connections == 1


def test_sessions_are_resumed(make_server, tls_upstream, pki):
    up = tls_upstream("good")
    srv = front(make_server, up, tls_ca=pki / "ca.pem")
    for i in range(4):  # the upstream closes after each answer: a new TLS connection each
        r, body = request(srv, "/api/close")
        assert r.status == 200
    assert up.connections == 4
    assert up.resumed >= 2


def test_untrusted_certificate_gives_502_and_a_log_line(make_server, tls_upstream):
    up = tls_upstream("untrusted")
    srv = front(make_server, up)
    r, body = request(srv, "/api/x")
    assert r.status == 502
    assert up.requests == 0
    err = srv.stderr()
    assert "proxy: upstream 127.0.0.1:%d: TLS handshake failed: certificate verify failed" % up.port in err, err
    assert "self-signed certificate" in err, err


def test_verify_off_accepts_any_certificate(make_server, tls_upstream):
    up = tls_upstream("untrusted")
    srv = front(make_server, up, tls_verify="false")
    r, body = request(srv, "/api/x")
    assert r.status == 200 and body.startswith(b"GET /api/x")


def test_own_ca_needed_for_a_private_ca(make_server, tls_upstream, pki):
    up = tls_upstream("good")
    srv = front(make_server, up)  # the system's CAs do not know the test CA
    assert request(srv, "/api/x")[0].status == 502
    assert "unable to get local issuer certificate" in srv.stderr()
    srv2 = front(make_server, up, tls_ca=pki / "ca.pem")
    assert request(srv2, "/api/x")[0].status == 200


def test_host_name_checked_and_overridden(make_server, tls_upstream, pki):
    up = tls_upstream("named")  # upstream.test only, not 127.0.0.1
    srv = front(make_server, up, tls_ca=pki / "ca.pem")
    assert request(srv, "/api/x")[0].status == 502
    assert "IP address mismatch" in srv.stderr(), srv.stderr()
    srv2 = front(make_server, up, tls_ca=pki / "ca.pem", tls_server_name="other.test")
    assert request(srv2, "/api/x")[0].status == 502
    assert "hostname mismatch" in srv2.stderr(), srv2.stderr()
    assert up.sni[-1] == "other.test"
    srv3 = front(make_server, up, tls_ca=pki / "ca.pem", tls_server_name="upstream.test")
    r, body = request(srv3, "/api/x")
    assert r.status == 200, body
    assert up.sni[-1] == "upstream.test"


def test_failed_verification_counts_as_a_failure(make_server, tls_upstream):
    up = tls_upstream("untrusted")
    port = up.port
    srv = front(make_server, up)
    for _ in range(3):
        assert request(srv, "/api/x")[0].status == 502
    assert srv.stderr().count("127.0.0.1:%d: TLS handshake failed" % port) == 3


@pytest.mark.parametrize(
    "keys, key, words",
    [
        ("to = https://127.0.0.1:1\n        tls_verify = maybe", "tls_verify", []),
        ("to = https://127.0.0.1:1\n        tls_ca = /nonexistent/ca.pem", "tls_ca", ["No such file"]),
        ("to = https://127.0.0.1:1\n        tls_ca = %(garbage)s", "tls_ca", ["cannot load CA certificates"]),
        ("to = https://127.0.0.1:1\n        tls_verify = false\n        tls_ca = %(ca)s", "tls_ca", ["tls_verify"]),
        ("to = https://127.0.0.1:1\n        tls_server_name = a/b", "tls_server_name", ["host name"]),
        ("to = http://127.0.0.1:1\n        tls_verify = false", "tls_verify", ["https://"]),
        ("to = 127.0.0.1:1\n        tls_server_name = x.test", "tls_server_name", ["https://"]),
        ("to = https://127.0.0.1:1/path", "to", ["no path"]),
    ],
)
def test_https_config_errors(tmp_path, pki, keys, key, words):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    keys = keys % {"garbage": garbage, "ca": pki / "ca.pem"}
    text = listener() + "site {\n    proxy /api {\n        %s\n    }\n}\n" % keys
    conf, p = run_config(tmp_path, text)
    check(p, conf, 4 + keys.count("\n"), key, words)


def test_https_upstream_default_port_and_system_store_load(tmp_path):
    text = listener() + "site {\n    proxy /api {\n        to = https://127.0.0.1\n    }\n}\n"
    conf = tmp_path / "ok.conf"
    conf.write_text(text)
    from conftest import colibri_bin
    p = subprocess.run([str(colibri_bin()), "--check-config", "-c", str(conf)], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr


def test_under_the_sandbox(make_server, tls_upstream, pki):
    import time
    up = tls_upstream("good")
    srv = front(make_server, up, tls_ca=pki / "ca.pem")
    srv2 = make_server(site="site {\n    proxy /api {\n        to = https://127.0.0.1:%d\n        tls_ca = %s\n"
                       "    }\n}\n" % (up.port, pki / "ca.pem"), threads="1", sandbox="true")
    deadline = time.monotonic() + 5
    while "sandbox: on" not in srv2.stderr() and time.monotonic() < deadline:
        time.sleep(0.05)
    for s in (srv, srv2):
        r, body = request(s, "/api/s")
        assert r.status == 200 and body.startswith(b"GET /api/s"), (body, s.stderr())
    up2 = tls_upstream("untrusted")
    srv3 = make_server(site="site {\n    proxy /api {\n        to = https://127.0.0.1:%d\n    }\n}\n" % up2.port,
                       threads="1", sandbox="true")
    deadline = time.monotonic() + 5
    while "sandbox: on" not in srv3.stderr() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert request(srv3, "/api/s")[0].status == 502
    assert "certificate verify failed" in srv3.stderr()


# --- https:// servers in an upstream group -------------------------------------------


def group_front(make_server, servers, **keys):
    """A proxy to "upstream app" made of servers, the group's extra keys."""
    text = "upstream app {\n" + "".join("    server %s\n" % v for v in servers)
    text += "".join("    %s = %s\n" % kv for kv in keys.items())
    text += "}\nsite {\n    proxy /api {\n        to = app\n    }\n}\n"
    return make_server(site=text, threads="1")


def wait_for(srv, text, timeout=10):
    import time
    from rawhttp import TIME_SCALE
    deadline = time.monotonic() + timeout * TIME_SCALE
    while text not in srv.stderr():
        assert time.monotonic() < deadline, (text, srv.stderr())
        time.sleep(0.05)


def test_group_of_https_servers_balanced_and_kept(make_server, tls_upstream, pki):
    a, b = tls_upstream("good"), tls_upstream("good")
    srv = group_front(make_server, ["https://127.0.0.1:%d" % a.port, "https://127.0.0.1:%d" % b.port],
                      tls_ca=pki / "ca.pem")
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=15)
    for i in range(8):
        r, body = request(srv, "/api/g%d" % i, conn=c)
        assert r.status == 200 and body.startswith(b"GET /api/g%d" % i), body
    c.close()
    assert (a.requests, b.requests) == (4, 4)  # round robin, weights 1
    assert (a.connections, b.connections) == (1, 1)  # each server's connection kept, TLS


def test_group_mixes_plain_and_https_servers(make_server, tls_upstream, pki):
    a, b = tls_upstream("good"), tls_upstream(None)
    srv = group_front(make_server, ["https://127.0.0.1:%d" % a.port, "127.0.0.1:%d" % b.port],
                      tls_ca=pki / "ca.pem")
    for i in range(6):
        r, body = request(srv, "/api/m%d" % i)
        assert r.status == 200 and body.startswith(b"GET /api/m%d" % i), body
    assert (a.requests, b.requests) == (3, 3)


def test_group_verifies_each_server_and_its_health_check_speaks_tls(make_server, tls_upstream, pki):
    good, bad = tls_upstream("good"), tls_upstream("untrusted")
    srv = group_front(make_server, ["https://127.0.0.1:%d" % good.port, "https://127.0.0.1:%d" % bad.port],
                      tls_ca=pki / "ca.pem", health_check="/healthz", health_interval="100ms")
    # the check is a GET over TLS: the good server answers it, the other's
    # certificate fails verification, which puts it down
    wait_for(srv, "server 127.0.0.1:%d is down (health check /healthz: certificate verify failed" % bad.port)
    assert "/healthz" in good.paths
    assert "server 127.0.0.1:%d is down" % good.port not in srv.stderr()
    for i in range(4):
        r, body = request(srv, "/api/h%d" % i)
        assert r.status == 200 and body.startswith(b"GET /api/h%d" % i), body
    assert bad.requests == 0
    # a certificate the CA signed: the next check puts the server back
    bad.use("good")
    wait_for(srv, "server 127.0.0.1:%d is up (health check /healthz: answered 200)" % bad.port)
    for i in range(4):
        assert request(srv, "/api/back%d" % i)[0].status == 200
    assert any(p.startswith("/api/back") for p in bad.paths), bad.paths


@pytest.mark.parametrize(
    "text, line, key, words",
    [
        ("upstream app {\n    server 127.0.0.1:1\n    tls_ca = %(ca)s\n}\n", 4, "tls_ca", ["server https://"]),
        ("upstream app {\n    server https://127.0.0.1:1/x\n}\n", 3, "server", ["no path"]),
        ("upstream app {\n    server https://127.0.0.1:1\n    tls_verify = sometimes\n}\n", 4, "tls_verify", []),
        ("upstream app {\n    server https://127.0.0.1:1\n}\nsite {\n    proxy /api {\n        to = app\n"
         "        tls_verify = false\n    }\n}\n", 8, "tls_verify", ["upstream 'app'"]),
        ("site {\n    fastcgi /php {\n        to = https://127.0.0.1:1\n        root = /\n    }\n}\n", 4, "to",
         ["FastCGI does not go over TLS"]),
    ],
)
def test_group_https_config_errors(tmp_path, pki, text, line, key, words):
    text = listener() + text % {"ca": pki / "ca.pem"}
    conf, p = run_config(tmp_path, text)
    check(p, conf, line, key, words)
