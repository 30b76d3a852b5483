"""A small WebSocket client on raw sockets (RFC 6455), for tests: it can
send frames that break every rule, which a real client library refuses to
do."""

import base64
import hashlib
import os
import select
import socket
import struct
import time
import zlib

from rawhttp import TIME_SCALE, maybe_tls

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def accept_for(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def frame(opcode, payload=b"", fin=True, rsv=0, mask=True, length_bytes=None):
    """One frame. length_bytes forces a 16- or 64-bit length (non-minimal)."""
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload)
    m = 0x80 if mask else 0
    if length_bytes == 8 or (length_bytes is None and n > 0xFFFF):
        head = struct.pack("!BBQ", b0, m | 127, n)
    elif length_bytes == 2 or (length_bytes is None and n > 125):
        head = struct.pack("!BBH", b0, m | 126, n)
    else:
        head = struct.pack("!BB", b0, m | n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + xor(payload, key)


def xor(data, key):
    if not data:
        return b""
    k = (key * (len(data) // 4 + 1))[: len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(len(data), "big")


def close_payload(code, reason=b""):
    return struct.pack("!H", code) + reason


class WS:
    def __init__(self, host, port, path="/ws", headers=None, timeout=None, extensions=None, rcvbuf=None):
        timeout = timeout or 5.0 * TIME_SCALE
        if rcvbuf:  # set before connecting, so the window stays that small
            self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect((host, port))
        else:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = maybe_tls(self.sock)
        self.timeout = timeout
        self.buf = b""
        self.key = base64.b64encode(os.urandom(16)).decode()
        h = {
            "Host": "localhost",
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": self.key,
            "Sec-WebSocket-Version": "13",
        }
        if extensions:
            h["Sec-WebSocket-Extensions"] = extensions
        h.update(headers or {})
        req = "GET %s HTTP/1.1\r\n" % path + "".join("%s: %s\r\n" % kv for kv in h.items() if kv[1] is not None)
        self.sock.sendall(req.encode() + b"\r\n")
        head = self._read_until(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                self.headers[k.strip().lower()] = v.strip()
        self.deflate = "permessage-deflate" in self.headers.get("sec-websocket-extensions", "")
        # both sides keep their context from message to message (no
        # *_no_context_takeover unless the test resets them itself)
        self.inflater = zlib.decompressobj(-15)
        self.compressor = zlib.compressobj(6, zlib.DEFLATED, -15)

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("nothing from the server; have %r" % self.buf[:100])
        r, _, _ = select.select([self.sock], [], [], left)
        if not r:
            raise TimeoutError("nothing from the server; have %r" % self.buf[:100])
        try:
            d = self.sock.recv(1 << 20)
        except ConnectionResetError:
            d = b""
        if not d:
            raise EOFError("closed by the server")
        self.buf += d

    def _read_until(self, delim):
        deadline = time.monotonic() + self.timeout
        while delim not in self.buf:
            self._fill(deadline)
        i = self.buf.index(delim) + len(delim)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def _read_exact(self, n, deadline):
        while len(self.buf) < n:
            self._fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, data):
        self.sock.sendall(data)

    def send_frame(self, *a, **kw):
        self.sock.sendall(frame(*a, **kw))

    def recv_frame(self, timeout=None):
        """(fin, rsv, opcode, payload) of the next frame from the server."""
        deadline = time.monotonic() + (timeout or self.timeout)
        b0, b1 = self._read_exact(2, deadline)
        assert not b1 & 0x80, "server frames are not masked"
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read_exact(2, deadline))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read_exact(8, deadline))[0]
        return bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0xF, self._read_exact(n, deadline)

    def recv_message(self, timeout=None):
        """(opcode, payload) of the next data message (pongs skipped),
        decompressed when it says so; or (CLOSE, payload)."""
        parts, first, compressed = [], None, False
        while True:
            fin, rsv, op, p = self.recv_frame(timeout)
            if op == PONG:
                continue
            if op == CLOSE:
                return CLOSE, p
            if first is None:
                first, compressed = op, bool(rsv & 4)
            parts.append(p)
            if fin:
                data = b"".join(parts)
                if compressed:
                    data = self.inflater.decompress(data + b"\x00\x00\xff\xff")
                return first, data

    def send_message(self, opcode, payload, compress=False):
        if compress:
            c = self.compressor
            data = c.compress(payload) + c.flush(zlib.Z_SYNC_FLUSH)
            assert data.endswith(b"\x00\x00\xff\xff")
            self.send_frame(opcode, data[:-4], rsv=4)
        else:
            self.send_frame(opcode, payload)

    def expect_close(self, code, timeout=None):
        """The server's close frame carries code; then it closes the TCP connection."""
        while True:
            fin, rsv, op, p = self.recv_frame(timeout)
            if op == CLOSE:
                break
        got = struct.unpack("!H", p[:2])[0] if len(p) >= 2 else None
        assert got == code, "close code %r, want %r" % (got, code)
        self.wait_eof()
        return p

    def wait_eof(self, timeout=3.0):
        deadline = time.monotonic() + timeout
        try:
            while True:
                self._fill(deadline)
                self.buf = b""
        except EOFError:
            return

    def close(self):
        self.sock.close()
