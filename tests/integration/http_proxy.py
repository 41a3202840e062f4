"""http_proxy.py - the forwarding HTTP proxy the integration tests put in
front of a test server, to make it say what it never says by itself.

A test subclasses Proxy and runs serve(TheClass):
    python3 proxy.py LISTEN_PORT UPSTREAM_PORT
Every request is logged to stdout ("METHOD PATH", and what the subclass adds)
before its body is read, so a request cut midway still counts, and is sent
upstream as it came, the Host header too (a signature over it still
holds).  A subclass may answer a request itself (answer_instead) and change
the headers of an answer (rewrite).
"""
import http.client
import http.server
import sys

HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "content-length"}


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream = 0

    def log_message(self, fmt, *args):
        pass

    def note(self):
        """What the log line of this request adds after its method and path."""
        return ""

    def answer_instead(self, body):
        """(status, body) to answer without asking upstream, or None."""
        return None

    def rewrite(self, headers):
        """The answer's headers, a list of (name, value), as the client gets them."""
        return headers

    def answer(self, status, body):
        self.send_response_only(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def forward(self):
        print(" ".join(w for w in (self.command, self.path, self.note()) if w), flush=True)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        mine = self.answer_instead(body)
        if mine:
            return self.answer(*mine)
        up = http.client.HTTPConnection("127.0.0.1", self.upstream, timeout=60)
        up.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for name, value in self.headers.items():
            if name.lower() not in HOP and name.lower() != "expect":
                up.putheader(name, value)
        if body or self.command in ("PUT", "POST"):
            up.putheader("Content-Length", str(len(body)))
        up.endheaders()
        if body:
            up.send(body)
        resp = up.getresponse()
        data = resp.read()
        self.send_response_only(resp.status, resp.reason)
        kept = [(n, v) for n, v in resp.getheaders() if n.lower() not in HOP]
        for name, value in self.rewrite(kept):
            self.send_header(name, value)
        self.send_header("Content-Length", str(resp.getheader("Content-Length", len(data))
                                                if self.command == "HEAD" else len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        up.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward


def serve(handler):
    handler.upstream = int(sys.argv[2])
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
