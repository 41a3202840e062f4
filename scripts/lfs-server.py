#!/usr/bin/env python3
"""lfs-server.py - a Git LFS server for the tests, on 127.0.0.1 (server-git.sh
starts it behind nginx, which sends each repository's .../info/lfs/ to it).

It speaks the LFS batch API (https://github.com/git-lfs/git-lfs/blob/main/docs/api/batch.md)
with "basic" transfers, for downloads and uploads, so the real git-lfs client
can push objects to it and mlfs can fetch them:

  POST PREFIX/objects/batch   -> for each object a download or upload action
                                 whose href is PREFIX/objects/OID on the host
                                 the request named, with a header
                                 X-Lfs-Ticket the object's GET or PUT must
                                 carry; or a 404 error for a download of an
                                 object it does not have
  GET  PREFIX/objects/OID     -> the object (403 without the ticket; 400 when
                                 it comes with an Authorization header the
                                 server's own address was not sent: credentials
                                 must not travel to another origin)
  PUT  PREFIX/objects/OID     -> stores the object, refusing bytes whose
                                 SHA-256 is not OID

Objects are the files STORE/OID.  For the tests of a client facing a server
that answers wrong, a file STORE/OID.noaction makes the batch answer give that
object without its download action, and STORE/OID.omit leaves the object out
of the answer.  Every request is logged to stdout, one line each ("METHOD
PATH STATUS").  Usage: lfs-server.py PORT STORE
"""
import hashlib
import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_TYPE = "application/vnd.git-lfs+json"
OID = re.compile(r"^[0-9a-f]{64}$")


def ticket(oid):
    return "t-" + oid[:16]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body=b"", ctype=LFS_TYPE):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        print(f"{self.command} {self.path} {status}", flush=True)

    def split(self):
        """(prefix, rest) of a path .../info/lfs/REST, or (None, None)."""
        m = re.match(r"^(.*/info/lfs)(/.*)$", self.path)
        return (m.group(1), m.group(2)) if m else (None, None)

    def object_path(self, oid):
        return os.path.join(self.server.store, oid)

    def do_POST(self):
        prefix, rest = self.split()
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n)
        if rest != "/objects/batch":
            return self.reply(404, {"message": "Not found"})
        try:
            req = json.loads(data)
            op = req["operation"]
            objs = req["objects"]
        except (ValueError, KeyError, TypeError):
            return self.reply(422, {"message": "Not a batch request"})
        base = f"http://{self.headers.get('Host')}{prefix}/objects/"
        out = []
        for o in objs:
            oid, size = o.get("oid", ""), o.get("size", -1)
            ans = {"oid": oid, "size": size}
            have = OID.match(oid) and os.path.exists(self.object_path(oid))
            act = {"href": base + oid, "header": {"X-Lfs-Ticket": ticket(oid)},
                   "expires_in": 3600}
            quirk = self.object_path(oid) if OID.match(oid) else ""
            if op == "download" and os.path.exists(quirk + ".omit"):
                continue
            if op == "download" and have and not os.path.exists(quirk + ".noaction"):
                ans["actions"] = {"download": act}
            elif op == "download" and have:
                pass
            elif op == "download":
                ans["error"] = {"code": 404, "message": "Object does not exist"}
            elif op == "upload" and not have:
                ans["actions"] = {"upload": act}
            out.append(ans)
        self.reply(200, {"transfer": "basic", "objects": out, "hash_algo": "sha256"})

    def object_request(self):
        """The OID of an object request that may go on, or None (answered)."""
        _, rest = self.split()
        m = re.match(r"^/objects/([0-9a-f]{64})$", rest or "")
        if not m:
            self.reply(404, {"message": "Not found"})
            return None
        oid = m.group(1)
        if self.headers.get("X-Lfs-Ticket") != ticket(oid):
            self.reply(403, {"message": "No ticket for this object"})
            return None
        if (self.headers.get("Authorization") and
                self.headers.get("Host") == self.server.own):
            self.reply(400, {"message": "Credentials sent to the storage host"})
            return None
        return oid

    def do_GET(self):
        oid = self.object_request()
        if oid is None:
            return
        try:
            with open(self.object_path(oid), "rb") as f:
                body = f.read()
        except OSError:
            return self.reply(404, {"message": "Object does not exist"})
        self.reply(200, body, "application/octet-stream")

    def do_PUT(self):
        oid = self.object_request()
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n)
        if oid is None:
            return
        if hashlib.sha256(data).hexdigest() != oid:
            return self.reply(422, {"message": "Bytes are not the object"})
        tmp = self.object_path(oid) + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, self.object_path(oid))
        self.reply(200, b"")


def main():
    if len(sys.argv) != 3:
        print("usage: lfs-server.py PORT STORE", file=sys.stderr)
        sys.exit(2)
    port, store = int(sys.argv[1]), sys.argv[2]
    os.makedirs(store, exist_ok=True)
    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.store = store
    srv.own = f"127.0.0.1:{port}"
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    main()
