"""h2srv.py - colibri, h2o and nginx side by side with HTTP/2, for
bench/h2_cpu.py and bench/idle_h2.py.

Each server gets two ports on 127.0.0.1: h2c (prior knowledge) and h2 (TLS,
ALPN), one worker (colibri threads = 1, h2o num-threads: 1, nginx
worker_processes 1), the same static root (hello.txt: "Hello, World!", 13
bytes; 4k.bin; 1m.bin; 20m.bin) and the same P-256 certificate. `pin` is a
taskset CPU list for the server, or None.
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, secs=30):
    end = time.time() + secs
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d never opened" % port)


class Scratch:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="colibri-h2bench.")
        os.chmod(self.tmp, 0o755)
        self.root = os.path.join(self.tmp, "root")
        os.mkdir(self.root)
        with open(os.path.join(self.root, "hello.txt"), "wb") as f:
            f.write(b"Hello, World!")
        for name, size in (("4k.bin", 4096), ("1m.bin", 1 << 20), ("20m.bin", 20 << 20)):
            with open(os.path.join(self.root, name), "wb") as f:
                f.write(os.urandom(size))
        for n in os.listdir(self.root):
            os.chmod(os.path.join(self.root, n), 0o644)
        os.chmod(self.root, 0o755)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-days", "2", "-subj", "/CN=localhost", "-keyout",
                        os.path.join(self.tmp, "key.pem"), "-out", os.path.join(self.tmp, "cert.pem")],
                       check=True, capture_output=True)
        for n in ("key.pem", "cert.pem"):
            os.chmod(os.path.join(self.tmp, n), 0o644)

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


class Server:
    """name: colibri (binary from `binary`), h2o, nginx."""

    def __init__(self, scratch, name, binary=None, pin=None, extra=""):
        self.name, self.sc = name, scratch
        self.port, self.tls_port = free_port(), free_port()
        tmp, root = scratch.tmp, scratch.root
        pre = ["taskset", "-c", pin] if pin else []
        user = os.geteuid() == 0
        kind = name.split(":")[0]
        log = open(os.path.join(tmp, "%s-%d.log" % (kind, self.port)), "w")
        if kind == "colibri":
            conf = os.path.join(tmp, "colibri-%d.conf" % self.port)
            with open(conf, "w") as f:
                f.write("listener 127.0.0.1:%d\nlistener 127.0.0.1:%d {\n    tls = true\n}\n"
                        "threads = 1\nkeep_alive_timeout = 120s\n%s\n"
                        "site {\n    tls_certificate = %s/cert.pem\n    tls_key = %s/key.pem\n"
                        "    serve_files / {\n        path = %s\n        cache_for = 1h\n    }\n}\n"
                        % (self.port, self.tls_port, extra, tmp, tmp, root))
            cmd = pre + [binary, "-c", conf]
        elif kind == "h2o":
            conf = self._render("h2o.conf.in", "user: nobody" if user else "")
            cmd = pre + ["h2o", "-c", conf]
        elif kind == "nginx":
            conf = self._render("nginx_h2.conf.in", "user nobody nogroup;" if user else "")
            cmd = pre + ["nginx", "-c", conf, "-p", tmp, "-e", os.path.join(tmp, "nginx-error.log"),
                         "-g", "daemon off; pid %s/nginx-%d.pid;" % (tmp, self.port)]
        else:
            raise ValueError(name)
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc)
        wait_port(self.tls_port, self.proc)
        time.sleep(0.2)

    def _render(self, name, user_line):
        text = open(os.path.join(HERE, name)).read()
        for k, v in (("@PORT@", self.port), ("@TLS_PORT@", self.tls_port), ("@ROOT@", self.sc.root),
                     ("@TMP@", self.sc.tmp), ("@USER_LINE@", user_line)):
            text = text.replace(k, str(v))
        out = os.path.join(self.sc.tmp, "%s-%d" % (name.replace(".in", ""), self.port))
        with open(out, "w") as f:
            f.write(text)
        return out

    def pids(self):
        """The server's process and its children (nginx's worker, h2o's)."""
        out = [self.proc.pid]
        i = 0
        while i < len(out):
            try:
                for t in os.listdir("/proc/%d/task" % out[i]):
                    kids = open("/proc/%d/task/%s/children" % (out[i], t)).read().split()
                    out += [int(k) for k in kids if int(k) not in out]
            except OSError:
                pass
            i += 1
        return out

    def url(self, path, tls=False):
        if tls:
            return "https://127.0.0.1:%d%s" % (self.tls_port, path)
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
