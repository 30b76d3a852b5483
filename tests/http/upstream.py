#!/usr/bin/env python3
"""A small HTTP/1.1 upstream for the gateway tests, on loopback (or a unix
socket), one thread per connection, speaking raw bytes so that every
framing can be chosen exactly.

    upstream.py --port N --name NAME      # prints "ready" once listening
    upstream.py --unix PATH --name NAME

Paths (the query picks options):
  /echo            JSON: name, method, target, headers (a list of pairs),
                   body length and sha256 (the body is read: length or chunked)
  /status/N        answers status N with a short body (none for 204/304)
  /slow?ms=N       sleeps N ms, then answers 200 "slow"
  /chunked?n=K&size=S   K chunks of S bytes ('c'), chunked framing
  /close?size=S    S bytes without length, ended by closing (HTTP/1.0 style)
  /big?size=S      S bytes of a repeating pattern with Content-Length, written
                   in pieces so that a slow reader holds it back
  /die?size=S&after=A   announces S bytes, sends A of them, then closes
  /once            answers, then closes the kept connection 50 ms later
  /stray?ms=N      answers, then N ms later sends bytes nobody asked for on
                   the kept connection (and keeps it open)
  /lost            on a connection that answered before: reads the request
                   and closes without an answer (an upstream closing an idle
                   connection as the request comes); on a fresh one, 200
  /hang            reads the request and never answers
  /headers         answers with hop-by-hop and end-to-end fields to check
  /interim         a 100 and a 103 before its 200
  /sse             three server-sent events 400 ms apart, chunked
  /ws              a WebSocket echo (RFC 6455, text and binary, close)
  /healthz         200, or the code set with /_health?code=N
  /_stats          JSON: connections accepted, requests, hits by path
Every request counts in /_stats, also /_stats itself is not counted."""

import argparse
import base64
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit

PATTERN = bytes(range(256)) * 256  # 64 KiB

stats = {"connections": 0, "requests": 0, "hits": {}}
health = {"code": 200}
lock = threading.Lock()
NAME = "up"


def read_head(f):
    line = f.readline(65536)
    if not line:
        return None
    while line in (b"\r\n", b"\n"):
        line = f.readline(65536)
        if not line:
            return None
    method, target, version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers = []
    while True:
        l = f.readline(65536)
        if not l:
            return None
        if l in (b"\r\n", b"\n"):
            break
        k, v = l.decode("latin-1").rstrip("\r\n").split(":", 1)
        headers.append((k, v.strip()))
    return method, target, version, headers


def hget(headers, name):
    for k, v in headers:
        if k.lower() == name.lower():
            return v
    return None


def read_body(f, headers):
    """The request body: (bytes read, sha256 hex), without keeping it."""
    h = hashlib.sha256()
    n = 0
    te = hget(headers, "Transfer-Encoding")
    if te and te.lower().endswith("chunked"):
        while True:
            size = int(f.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                break
            left = size
            while left:
                b = f.read(min(left, 65536))
                if not b:
                    raise ConnectionError("cut")
                h.update(b)
                n += len(b)
                left -= len(b)
            f.readline()
    else:
        left = int(hget(headers, "Content-Length") or 0)
        while left:
            b = f.read(min(left, 65536))
            if not b:
                raise ConnectionError("cut")
            h.update(b)
            n += len(b)
            left -= len(b)
    return n, h.hexdigest()


def answer(sock, status, body=b"", headers=(), length=True):
    reason = {200: "OK", 101: "Switching Protocols"}.get(status, "Whatever")
    head = "HTTP/1.1 %d %s\r\n" % (status, reason)
    for k, v in headers:
        head += "%s: %s\r\n" % (k, v)
    if length and status not in (204, 304):
        head += "Content-Length: %d\r\n" % len(body)
    head += "\r\n"
    sock.sendall(head.encode("latin-1") + body)


def ws_echo(sock, f):
    def recv_exact(n):
        b = b""
        while len(b) < n:
            c = f.read(n - len(b))
            if not c:
                raise ConnectionError
            b += c
        return b

    while True:
        h = recv_exact(2)
        op = h[0] & 0x0F
        ln = h[1] & 0x7F
        if ln == 126:
            ln = struct.unpack("!H", recv_exact(2))[0]
        elif ln == 127:
            ln = struct.unpack("!Q", recv_exact(8))[0]
        mask = recv_exact(4) if h[1] & 0x80 else b"\0\0\0\0"
        data = bytearray(recv_exact(ln))
        for i in range(len(data)):
            data[i] ^= mask[i % 4]
        if op == 8:
            sock.sendall(b"\x88\x02" + bytes(data[:2]))
            return
        if op in (1, 2):
            out = bytes(data)
            if len(out) < 126:
                hdr = bytes([0x80 | op, len(out)])
            elif len(out) < 65536:
                hdr = bytes([0x80 | op, 126]) + struct.pack("!H", len(out))
            else:
                hdr = bytes([0x80 | op, 127]) + struct.pack("!Q", len(out))
            sock.sendall(hdr + out)


def serve(sock):
    f = sock.makefile("rb")
    before = 0  # requests this connection had before this one
    try:
        while True:
            req = read_head(f)
            if req is None:
                return
            answered, before = before, before + 1
            method, target, version, headers = req
            u = urlsplit(target)
            q = {k: v[0] for k, v in parse_qs(u.query).items()}
            path = u.path
            if path != "/_stats":
                with lock:
                    stats["requests"] += 1
                    stats["hits"][path] = stats["hits"].get(path, 0) + 1
            if path == "/hang":
                time.sleep(60)
                return
            blen, bsha = read_body(f, headers)
            keep = (hget(headers, "Connection") or "").lower() != "close"
            if path == "/_stats":
                with lock:
                    answer(sock, 200, json.dumps(stats).encode(), [("Content-Type", "application/json")])
            elif path == "/_health":
                health["code"] = int(q.get("code", "200"))
                answer(sock, 200, b"ok")
            elif path == "/healthz":
                answer(sock, health["code"], b"health")
            elif path.startswith("/status/"):
                st = int(path.split("/")[2])
                answer(sock, st, b"" if st in (204, 304) else ("status %d from %s" % (st, NAME)).encode(),
                       [("X-Upstream", NAME)])
            elif path == "/slow":
                time.sleep(int(q.get("ms", "1000")) / 1000)
                answer(sock, 200, b"slow")
            elif path == "/chunked":
                n, size = int(q.get("n", "3")), int(q.get("size", "5"))
                out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
                for i in range(n):
                    out += b"%x;ext=1\r\n%s\r\n" % (size, b"c" * size)
                out += b"0\r\nX-Trailer: t\r\n\r\n"
                sock.sendall(out)
            elif path == "/close":
                size = int(q.get("size", "10"))
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n" + b"z" * size)
                return
            elif path == "/big":
                size = int(q.get("size", "1000000"))
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % size)
                left = size
                while left:
                    n = min(left, len(PATTERN))
                    sock.sendall(PATTERN[:n])
                    left -= n
            elif path == "/die":
                size, after = int(q.get("size", "100000")), int(q.get("after", "1000"))
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"d" * after)
                time.sleep(0.1)
                sock.shutdown(socket.SHUT_RDWR)
                return
            elif path == "/diechunked":
                sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
                time.sleep(0.1)
                sock.shutdown(socket.SHUT_RDWR)
                return
            elif path == "/once":
                answer(sock, 200, ("once from %s" % NAME).encode())
                time.sleep(0.05)
                sock.shutdown(socket.SHUT_RDWR)
                return
            elif path == "/stray":
                answer(sock, 200, b"stray")
                time.sleep(int(q.get("ms", "100")) / 1000)
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray")
            elif path == "/lost":
                if answered:
                    sock.shutdown(socket.SHUT_RDWR)
                    return
                answer(sock, 200, ("%s from %s" % (method, NAME)).encode())
            elif path == "/headers":
                answer(sock, 200, b"h", [("Connection", "X-Drop-Me, keep-alive"), ("X-Drop-Me", "1"),
                                         ("Keep-Alive", "timeout=5"), ("X-Keep", "yes"),
                                         ("Server", "upstream-server"), ("Set-Cookie", "a=1"),
                                         ("Set-Cookie", "b=2"), ("Content-Type", "text/x-test")])
            elif path == "/ws":
                key = hget(headers, "Sec-WebSocket-Key") or ""
                acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
                sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Accept: " + acc + b"\r\n\r\n")
                ws_echo(sock, f)
                return
            elif path == "/interim":
                sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n")
                answer(sock, 200, b"final")
            elif path == "/sse":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                for i in range(3):
                    ev = b"data: tick%d\n\n" % i
                    sock.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
                    time.sleep(0.4)
                sock.sendall(b"0\r\n\r\n")
            elif path == "/early":
                answer(sock, 200, b"early")
            else:  # /echo and anything else
                body = json.dumps({"name": NAME, "method": method, "target": target, "version": version,
                                   "headers": headers, "body_len": blen, "body_sha256": bsha}).encode()
                answer(sock, 200, body, [("Content-Type", "application/json"), ("X-Upstream", NAME)])
            if not keep:
                return
    except (ConnectionError, OSError, ValueError):
        return
    finally:
        try:
            sock.close()
        except OSError:
            pass


def main():
    global NAME
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--unix")
    ap.add_argument("--name", default="up")
    a = ap.parse_args()
    NAME = a.name
    if a.unix:
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(a.unix)
    else:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", a.port))
    ls.listen(128)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        with lock:
            stats["connections"] += 1
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
