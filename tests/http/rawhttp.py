"""Raw HTTP/1.x over sockets: send exact bytes, read one response at a time,
tell a closed connection from an idle one.  Every wait has a deadline."""

import os
import select
import socket
import time

# Under a slow wrapper (make check-memcheck runs the server in valgrind) every
# default wait below is this many times longer; 1 otherwise.
TIME_SCALE = float(os.environ.get("COLIBRI_TIME_SCALE") or 1)
# COLIBRI_TEST_TLS=1: every server the fixtures start listens with TLS
# (conftest.py) and the clients here speak TLS to it (make check-tls)
TEST_TLS = os.environ.get("COLIBRI_TEST_TLS") == "1"


def maybe_tls(sock):
    """sock, or sock wrapped in TLS (no certificate check, no SNI: the
    default site's certificate) when the suite runs over TLS."""
    if not TEST_TLS:
        return sock
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx.wrap_socket(sock)


class Closed(Exception):
    """The peer closed (or reset) the connection before a full response."""


class Response:
    def __init__(self, version, status, reason, headers, body, head):
        self.version = version  # "HTTP/1.1"
        self.status = status  # int
        self.reason = reason
        self.headers = headers  # [(name, value)] in order, as received
        self.body = body  # bytes, de-chunked if it was chunked
        self.head = head  # raw bytes of the status line + header section

    def header(self, name):
        """First value of header NAME (case-insensitive), or None."""
        for n, v in self.headers:
            if n.lower() == name.lower():
                return v
        return None

    def header_all(self, name):
        return [v for n, v in self.headers if n.lower() == name.lower()]

    def tokens(self, name):
        """Comma-separated tokens of every NAME header, lower-cased."""
        out = []
        for v in self.header_all(name):
            out += [t.strip().lower() for t in v.split(",") if t.strip()]
        return out

    def __repr__(self):
        return "<Response %d %r headers=%r body=%r>" % (
            self.status,
            self.reason,
            self.headers,
            self.body[:200],
        )


def parse_head(head):
    """Parse a status line + header lines (bytes, without the final CRLFCRLF)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3:
        raise AssertionError("bad status line %r" % lines[0])
    version = parts[0].decode()
    status = int(parts[1])
    reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
    headers = []
    for line in lines[1:]:
        if b":" not in line:
            raise AssertionError("bad response header line %r" % line)
        if line[:1] in (b" ", b"\t"):
            raise AssertionError("obs-fold in response: %r" % line)
        name, value = line.split(b":", 1)
        if name != name.strip() or not name:
            raise AssertionError("bad response header name %r" % line)
        headers.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
    return version, status, reason, headers


class RawConn:
    """One client TCP connection with a read buffer."""

    def __init__(self, host, port, timeout=None):
        timeout = timeout or 5.0 * TIME_SCALE
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = maybe_tls(self.sock)
        self.buf = b""
        self.eof = False
        self.timeout = timeout

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def _fill(self, deadline):
        """Read more bytes into buf.  False on EOF/reset; raises on timeout."""
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no data from server in time; have %r" % self.buf[:300])
        # poll, not select: a test holding a thousand connections has fds
        # above select's limit of 1024
        p = select.poll()
        p.register(self.sock, select.POLLIN)
        if not p.poll(left * 1000):
            raise TimeoutError("no data from server in time; have %r" % self.buf[:300])
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def read_until(self, delim, deadline):
        start = 0
        while True:
            i = self.buf.find(delim, start)
            if i >= 0:
                out, self.buf = self.buf[: i + len(delim)], self.buf[i + len(delim) :]
                return out
            start = max(0, len(self.buf) - len(delim) + 1)
            if not self._fill(deadline):
                raise Closed("closed while waiting for %r; have %r" % (delim, self.buf[:300]))

    def read_exact(self, n, deadline):
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise Closed("closed after %d of %d body bytes" % (len(self.buf), n))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_response(self, head_request=False, timeout=None):
        """Read exactly one response (1xx included: the caller sees it)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        if not self.buf and not self._fill(deadline):
            raise Closed("connection closed before any response byte")
        head = self.read_until(b"\r\n\r\n", deadline)[:-4]
        version, status, reason, headers = parse_head(head)
        resp = Response(version, status, reason, headers, b"", head)
        if head_request or status < 200 or status in (204, 304):
            return resp
        te = resp.tokens("transfer-encoding")
        cl = resp.header_all("content-length")
        if te:
            assert not cl, "response has both Transfer-Encoding and Content-Length"
            assert te[-1] == "chunked", "unexpected response TE %r" % te
            resp.body = self._read_chunked(deadline)
        elif cl:
            assert len(set(cl)) == 1 and cl[0].isdigit(), "bad response Content-Length %r" % cl
            resp.body = self.read_exact(int(cl[0]), deadline)
        else:
            while self._fill(deadline):
                pass
            resp.body, self.buf = self.buf, b""
        return resp

    def read_final(self, head_request=False, timeout=None):
        """Read responses until a final (non-1xx) one; return (final, [interim])."""
        interim = []
        while True:
            r = self.read_response(head_request, timeout)
            if r.status >= 200:
                return r, interim
            interim.append(r)

    def _read_chunked(self, deadline):
        body = b""
        while True:
            line = self.read_until(b"\r\n", deadline)[:-2]
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                break
            body += self.read_exact(size, deadline)
            assert self.read_exact(2, deadline) == b"\r\n", "chunk without CRLF"
        while self.read_until(b"\r\n", deadline) != b"\r\n":
            pass
        return body

    def wait_closed(self, timeout=2.0):
        """True if the server closes (EOF or reset) within TIMEOUT (times
        TIME_SCALE) with no further data; False if it is still open at the
        deadline.  Extra bytes are an error: a response nobody asked for."""
        deadline = time.monotonic() + timeout * TIME_SCALE
        while True:
            assert not self.buf, "unexpected extra bytes from server: %r" % self.buf[:300]
            try:
                if not self._fill(deadline):
                    return True
            except TimeoutError:
                return False

    def pending(self, timeout=0.3):
        """Whatever arrives within TIMEOUT (without waiting for EOF)."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except TimeoutError:
            pass
        out, self.buf = self.buf, b""
        return out


def recv_all(s):
    """Read until the peer closes (the socket's own timeout bounds each
    wait); returns the bytes."""
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            return data
        data += d


def exchange(port, data, timeout=5, host="127.0.0.1"):
    """Connect, send data, read until the server closes: (head, body) of
    what came, split at the first blank line."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(data)
        got = recv_all(s)
    head, _, body = got.partition(b"\r\n\r\n")
    return head, body


def recv_until(s, pred, limit):
    """Read until pred(data) or limit seconds; returns the bytes."""
    data = b""
    deadline = time.monotonic() + limit
    while not pred(data):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            d = s.recv(1 << 20)
        except socket.timeout:
            break
        if not d:
            break
        data += d
    return data


def request(method, target, host="localhost", headers=(), body=None, version="HTTP/1.1"):
    """Build request bytes.  HEADERS: list of (name, value) or raw str lines."""
    lines = ["%s %s %s" % (method, target, version)]
    if host is not None:
        lines.append("Host: " + host)
    for h in headers:
        lines.append(h if isinstance(h, str) else "%s: %s" % h)
    if body is not None and not any(
        isinstance(h, tuple) and h[0].lower() in ("content-length", "transfer-encoding") for h in headers
    ):
        lines.append("Content-Length: %d" % len(body))
    out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if body is not None:
        out += body if isinstance(body, bytes) else body.encode("latin-1")
    return out


def chunked(*pieces, trailers=b""):
    """Encode PIECES (bytes) as a chunked body ending with TRAILERS."""
    out = b""
    for p in pieces:
        out += b"%x\r\n" % len(p) + p + b"\r\n"
    return out + b"0\r\n" + trailers + b"\r\n"
