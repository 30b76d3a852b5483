"""A tiny WSGI app for the proxy's test with a real app server (gunicorn):
/info answers what it was asked (method, path, query, a few fields),
/upload the length and SHA-256 of the body, /stream three pieces of a
generator body (no length: gunicorn sends it chunked)."""

import hashlib
import json


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/upload":
        h = hashlib.sha256()
        n = 0
        inp = environ["wsgi.input"]
        while True:
            b = inp.read(65536)
            if not b:
                break
            n += len(b)
            h.update(b)
        body = json.dumps({"len": n, "sha256": h.hexdigest()}).encode()
    elif path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return (b"piece%d\n" % i for i in range(3))
    else:
        body = json.dumps({
            "method": environ["REQUEST_METHOD"],
            "path": path,
            "query": environ.get("QUERY_STRING", ""),
            "host": environ.get("HTTP_HOST"),
            "xff": environ.get("HTTP_X_FORWARDED_FOR"),
            "proxy": environ.get("HTTP_PROXY"),
        }).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
