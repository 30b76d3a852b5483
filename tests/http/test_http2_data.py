"""HTTP/2 file answers as DATA frames whose bytes nghttp2 never copies
(NGHTTP2_DATA_FLAG_NO_COPY): on h2c a file's frames leave by sendfile()
after their 9-byte header, over TLS they are read straight into the
connection's output. Large files, ranges and small client windows (flow
control cutting the file into frames of every size) must arrive intact,
over h2c and h2."""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import time

import h2.settings
import pytest

from conftest import WRAPPER, free_port
from rawhttp import TIME_SCALE
from test_http2 import H2, SITE, tls_h2_site

SIZES = {"1m.bin": 1 << 20, "20m.bin": 20 << 20}


def sha(b):
    return hashlib.sha256(b).hexdigest()


@pytest.fixture(scope="module")
def files():
    return {name: os.urandom(size) for name, size in SIZES.items()}


def put(root, files):
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    (root / "file.txt").write_bytes(b"hello from a file\n")


@pytest.fixture
def both(make_server, tmp_path, files):
    """One server with an h2c listener and a TLS one (ALPN h2): (h2c url, h2 url)."""
    root = tmp_path / "wwwroot"
    port, port_off = free_port(), free_port()
    site = tls_h2_site(port, port_off, root, tmp_path)
    srv = make_server(site=site)
    put(root, files)
    return srv, ["--http2-prior-knowledge", srv.url], ["-k", "--http2", "https://127.0.0.1:%d" % port]


def curl(args, path, *more, timeout=60):
    p = subprocess.run(
        ["curl", "-sS", "--max-time", str(int(timeout * TIME_SCALE))] + args[:-1] + list(more) + [args[-1] + path],
        capture_output=True,
        timeout=timeout * TIME_SCALE + 5,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("proto", ["h2c", "h2"])
def test_large_files_and_ranges_arrive_intact(both, files, proto):
    srv, h2c, h2 = both
    args = h2c if proto == "h2c" else h2
    for name, data in files.items():
        assert sha(curl(args, "/" + name)) == sha(data), name
    big = files["20m.bin"]
    # ranges: one in the middle (odd offsets), the last bytes, a tail
    assert sha(curl(args, "/20m.bin", "-r", "12345-15000000")) == sha(big[12345:15000001])
    assert curl(args, "/20m.bin", "-r", "-100") == big[-100:]
    assert sha(curl(args, "/1m.bin", "-r", "777-")) == sha(files["1m.bin"][777:])
    # two ranges: multipart/byteranges, both parts whole
    out = curl(args, "/1m.bin", "-r", "100-70000,500000-600000")
    one, two = files["1m.bin"][100:70001], files["1m.bin"][500000:600001]
    assert one in out and two in out


@pytest.mark.parametrize("proto", ["h2c", "h2"])
@pytest.mark.parametrize("bits", [13, 14, 15])
def test_small_windows_cut_files_into_frames_of_every_size(both, files, proto, bits):
    """nghttp with a stream window of 2^bits - 1 (8191: frames below the
    sendfile threshold, read into the output; 16383 and 32767: odd sizes
    and full frames by sendfile) and a connection window of 2^(bits+1) - 1,
    two large files and a small one at once on one connection."""
    srv, h2c, h2 = both
    base = (h2c if proto == "h2c" else h2)[-1]
    p = subprocess.run(
        ["nghttp", "-n", "-s", "-w", str(bits), "-W", str(bits + 1), base + "/20m.bin", base + "/1m.bin",
         base + "/file.txt"],
        capture_output=True,
        timeout=120 * TIME_SCALE,
    )
    assert p.returncode == 0, p.stderr
    # with -n the bodies are dropped: the statistics give each stream's
    # status and size received (rounded); each body is checked whole below
    stats = re.findall(rb"^\s*\d+\s+\S+\s+\S+\s+\S+\s+(\d+)\s+(\S+) (/\S+)$", p.stdout, re.M)
    assert sorted(stats) == [(b"200", b"18", b"/file.txt"), (b"200", b"1M", b"/1m.bin"), (b"200", b"20M", b"/20m.bin")], p.stdout
    for path, data in (("/20m.bin", files["20m.bin"]), ("/1m.bin", files["1m.bin"])):
        got = subprocess.run(
            ["nghttp", "-w", str(bits), "-W", str(bits + 1), base + path],
            capture_output=True,
            timeout=120 * TIME_SCALE,
        )
        assert got.returncode == 0, got.stderr
        assert sha(got.stdout) == sha(data), path


def test_window_opened_bit_by_bit_while_other_streams_run(make_server, tmp_path, files):
    """The Python h2 client: a 1 MiB answer and a range of the 20 MiB one
    on a stream window of 20,000 bytes (frames of 16,384 and 3,616), the
    window opened in odd amounts, with small answers on other streams in
    between: every byte arrives, in order."""
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root)
    put(root, files)
    c = H2(srv, timeout=60)
    c.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 20000})
    c.flush()
    a = c.request("/1m.bin")
    b = c.request("/20m.bin", headers=[("range", "bytes=3-2000002")])
    small = [c.request("/file.txt") for _ in range(5)]
    res = c.wait(a, b, *small, timeout=60)
    assert res[0]["headers"][":status"] == "200" and sha(res[0]["data"]) == sha(files["1m.bin"])
    assert res[1]["headers"][":status"] == "206"
    assert sha(res[1]["data"]) == sha(files["20m.bin"][3:2000003])
    for r in res[2:]:
        assert bytes(r["data"]) == b"hello from a file\n"
    c.close()


@pytest.mark.skipif(bool(WRAPPER) or not shutil.which("strace"), reason="strace on the server's own pid")
def test_h2c_file_data_leaves_by_sendfile(make_server, tmp_path, files):
    """On h2c a file's DATA frames are not copied through memory: the
    server's threads, traced while one 1 MiB file is fetched, call
    sendfile() for it and never pread()."""
    root = tmp_path / "wwwroot"
    srv = make_server(site=SITE % root)
    put(root, files)
    curl(["--http2-prior-knowledge", srv.url], "/file.txt")  # the worker is up
    out = tmp_path / "strace.txt"
    tr = subprocess.Popen(
        ["strace", "-f", "-c", "-o", str(out), "-e", "trace=sendfile,pread64,read,writev", "-p", str(srv.proc.pid)],
        stderr=subprocess.PIPE,
    )
    try:
        time.sleep(1.0 * TIME_SCALE)  # attached to every thread
        if tr.poll() is not None:
            pytest.skip("strace cannot attach here: %s" % tr.stderr.read().decode())
        assert sha(curl(["--http2-prior-knowledge", srv.url], "/1m.bin")) == sha(files["1m.bin"])
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(10)
    text = out.read_text()
    calls = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", text, re.M)}
    assert calls.get("sendfile", 0) >= 64, text  # 16 KiB frames: one sendfile() each
    assert calls.get("pread64", 0) == 0, text


def test_many_connections_at_once_keep_their_frames_apart(both, files):
    """The sessions of a worker share one outbound frame buffer (h2.c): 24
    connections of 4 streams each, h2c and h2, HEADERS, files and memory
    bodies interleaved; h2load counts every answer and fails on a frame or
    header block it cannot decode, and curl meanwhile gets the whole file."""
    srv, h2c, h2 = both
    for args in (h2c, h2):
        base = args[-1]
        load = subprocess.Popen(
            ["h2load", "-n", "600", "-c", "24", "-m", "4", base + "/file.txt", base + "/1m.bin",
             base + "/file.txt"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for _ in range(3):
            assert sha(curl(args, "/1m.bin")) == sha(files["1m.bin"])
        out, _ = load.communicate(timeout=120 * TIME_SCALE)
        assert b"600 succeeded, 0 failed, 0 errored" in out, out
        assert b"600 2xx" in out, out
