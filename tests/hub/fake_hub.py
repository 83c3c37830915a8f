"""A fake Hugging Face hub on 127.0.0.1 for the tests: the real API's JSON shapes and headers.

usage: fake_hub.py ROOT [--gated REPO=TOKEN] [--drop-once PATH] [--corrupt PATH]
                        [--cdn-delay SECONDS] [--log FILE]

ROOT/{org}/{name}/... are the repositories' files (links followed). Two ports, printed as one
line "hub PORT cdn PORT" on stdout:
- hub: GET /api/models/{repo}[/revision/{rev}]?blobs=true as huggingface_hub's model_info reads it
  ({"sha", "siblings": [{"rfilename", "blobId", "size", "lfs": {"sha256", "size", "pointerSize"}}]}),
  /api/models/{repo}/tree/{rev}?recursive=true as its list_repo_tree reads it (snapshot_download);
  /{repo}/resolve/{rev}/{path}: an LFS file (.safetensors, .gguf, .bin) answers 302 to the CDN port
  with ETag (of its pointer), X-Linked-Etag (its sha256), X-Linked-Size and X-Repo-Commit; a file
  kept in git answers a relative 307 to /api/resolve-cache/models/{repo}/{commit}/{path}, which
  sends it with ETag = its git blob id. Errors carry X-Error-Code as the hub's do: RepoNotFound
  (401 without a token), RevisionNotFound, EntryNotFound (404), GatedRepo (401, 403 for a wrong token).
- cdn: /blobs/{sha256}?X-Amz-Signature=...: the bytes, Range requests answered 206; a request
  carrying Authorization is refused 400 as S3 refuses a second auth mechanism.
--drop-once PATH: the first CDN answer for that file sends half its bytes and closes the connection.
--corrupt PATH: the CDN sends that file with one byte changed.
--log FILE: one JSON line per request: server, method, path, range, auth (whether it had a token).
"""
import argparse
import hashlib
import http.server
import json
import os
import pathlib
import sys
import threading
import time
import urllib.parse

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin")


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, name, folder):
        self.name = name
        self.files = {}  # path -> dict(data-less facts)
        for f in sorted(folder.rglob("*")):
            if not f.is_file():
                continue
            path = f.relative_to(folder).as_posix()
            data = f.read_bytes()
            entry = {"file": f, "size": len(data)}
            if path.endswith(LFS_SUFFIXES):
                entry["sha256"] = hashlib.sha256(data).hexdigest()
                pointer = (f"version https://git-lfs.github.com/spec/v1\noid sha256:{entry['sha256']}\n"
                           f"size {len(data)}\n").encode()
                entry["pointer"] = pointer
                entry["blobId"] = git_blob_id(pointer)
            else:
                entry["blobId"] = git_blob_id(data)
            self.files[path] = entry
        listing = "".join(f"{p} {e['blobId']}\n" for p, e in self.files.items())
        self.commit = hashlib.sha1(listing.encode()).hexdigest()

    def siblings(self):
        out = []
        for path, e in self.files.items():
            s = {"rfilename": path, "blobId": e["blobId"], "size": e["size"]}
            if "sha256" in e:
                s["lfs"] = {"sha256": e["sha256"], "size": e["size"], "pointerSize": len(e["pointer"])}
            out.append(s)
        return out


    def tree(self, under):
        """GET /api/models/{repo}/tree/{rev}/{under}?recursive=true: folders and files (oid: git blob id)."""
        out, folders = [], set()
        for path, e in self.files.items():
            if under and not path.startswith(under + "/"):
                continue
            parts = path.split("/")
            for i in range(1, len(parts)):
                folders.add("/".join(parts[:i]))
            entry = {"type": "file", "oid": e["blobId"], "size": e["size"], "path": path}
            if "sha256" in e:
                entry["lfs"] = {"oid": e["sha256"], "size": e["size"], "pointerSize": len(e["pointer"])}
            out.append(entry)
        out += [{"type": "directory", "oid": hashlib.sha1(f.encode()).hexdigest(), "size": 0, "path": f}
                for f in sorted(folders) if not under or f.startswith(under + "/")]
        return out


class State:
    def __init__(self, args):
        root = pathlib.Path(args.root)
        self.repos = {}
        for org in sorted(p for p in root.iterdir() if p.is_dir()):
            for name in sorted(p for p in org.iterdir() if p.is_dir()):
                repo = f"{org.name}/{name.name}"
                self.repos[repo] = Repo(repo, name)
        self.gated = dict(g.split("=", 1) for g in args.gated)
        self.drop_once = set(args.drop_once)
        self.corrupt = set(args.corrupt)
        self.cdn_delay = args.cdn_delay
        self.log = open(args.log, "a") if args.log else None
        self.lock = threading.Lock()
        self.by_sha = {}
        for repo in self.repos.values():
            for path, e in repo.files.items():
                if "sha256" in e:
                    self.by_sha[e["sha256"]] = (repo, path, e)
        self.cdn_port = 0

    def record(self, server, handler):
        if not self.log:
            return
        entry = {"server": server, "method": handler.command, "path": urllib.parse.unquote(handler.path.split("?")[0]),
                 "range": handler.headers.get("Range"), "auth": handler.headers.get("Authorization") is not None}
        with self.lock:
            self.log.write(json.dumps(entry) + "\n")
            self.log.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None
    server_name_ = "hub"

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", headers=None, content_type="application/json"):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code, message):
        self.send(status, json.dumps({"error": message}).encode(), {"X-Error-Code": code, "X-Error-Message": message})

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.state.record(self.server_name_, self)
        try:
            if self.server_name_ == "cdn":
                self.cdn()
            else:
                self.hub()
        except (BrokenPipeError, ConnectionResetError):
            pass

    # The hub's part: API, resolve, resolve-cache.
    def token(self):
        auth = self.headers.get("Authorization", "")
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else None

    def find_repo(self, repo):
        """The repository when this caller may see it; else an error was sent and None returned."""
        token = self.token()
        if repo not in self.state.repos:
            if token:
                self.error(404, "RepoNotFound", f"Repository not found for url: {self.path}")
            else:
                self.error(401, "RepoNotFound", "Repository Not Found. Invalid username or password.")
            return None
        wanted = self.state.gated.get(repo)
        if wanted is not None and token != wanted:
            status = 403 if token else 401
            self.error(status, "GatedRepo", f"Access to model {repo} is restricted. You must have access to it and "
                       "be authenticated to access it. Please log in.")
            return None
        return self.state.repos[repo]

    def check_rev(self, repo, rev):
        if rev in ("main", repo.commit):
            return True
        self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return False

    def hub(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        info = len(parts) >= 6 and parts[:2] == ["api", "models"] and parts[4] == "revision"
        if info or (len(parts) == 4 and parts[:2] == ["api", "models"]):
            repo = self.find_repo(f"{parts[2]}/{parts[3]}")
            rev = "/".join(parts[5:]) if info else "main"
            if repo is None or not self.check_rev(repo, rev):
                return
            blobs = "blobs=true" in url.query
            siblings = repo.siblings() if blobs else [{"rfilename": s["rfilename"]} for s in repo.siblings()]
            org = repo.name.split("/")[0]
            body = {"_id": "0" * 24, "id": repo.name, "modelId": repo.name, "author": org, "sha": repo.commit,
                    "lastModified": "2025-01-01T00:00:00.000Z", "private": False,
                    "gated": "manual" if repo.name in self.state.gated else False, "disabled": False,
                    "downloads": 0, "likes": 0, "tags": [], "library_name": "transformers",
                    "createdAt": "2025-01-01T00:00:00.000Z", "siblings": siblings}
            self.send(200, json.dumps(body).encode())
            return
        if len(parts) >= 6 and parts[:2] == ["api", "models"] and parts[4] == "tree":
            repo = self.find_repo(f"{parts[2]}/{parts[3]}")
            if repo is None or not self.check_rev(repo, parts[5]):
                return
            self.send(200, json.dumps(repo.tree("/".join(parts[6:]))).encode())
            return
        if len(parts) >= 5 and parts[2] == "resolve":
            self.resolve(f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:]), cache=False)
            return
        if len(parts) >= 7 and parts[:3] == ["api", "resolve-cache", "models"]:
            self.resolve(f"{parts[3]}/{parts[4]}", parts[5], "/".join(parts[6:]), cache=True)
            return
        self.error(404, "EntryNotFound", f"no route {url.path}")

    def resolve(self, name, rev, path, cache):
        repo = self.find_repo(name)
        if repo is None or not self.check_rev(repo, rev):
            return
        e = repo.files.get(path)
        if e is None:
            self.error(404, "EntryNotFound", f"{path} does not exist on \"{rev}\"")
            return
        common = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
        if "sha256" in e:
            location = f"http://127.0.0.1:{self.state.cdn_port}/blobs/{e['sha256']}?X-Amz-Signature=fake"
            self.send(302, b"", {**common, "Location": location, "ETag": f"\"{e['blobId']}\"",
                                  "X-Linked-Etag": f"\"{e['sha256']}\"", "X-Linked-Size": str(e["size"])})
        elif not cache:
            target = "/api/resolve-cache/models/" + name + "/" + repo.commit + "/" + urllib.parse.quote(path)
            self.send(307, b"", {**common, "Location": target, "ETag": f"\"{e['blobId']}\""})
        else:
            self.send(200, e["file"].read_bytes(), {**common, "ETag": f"\"{e['blobId']}\""}, "application/octet-stream")

    # The CDN's part.
    def cdn(self):
        if self.headers.get("Authorization") is not None:
            self.send(400, b"<Error><Code>InvalidArgument</Code><Message>Only one auth mechanism allowed</Message></Error>",
                      content_type="application/xml")
            return
        sha = urllib.parse.urlsplit(self.path).path.rsplit("/", 1)[-1]
        found = self.state.by_sha.get(sha)
        if found is None:
            self.send(404, b"<Error><Code>NoSuchKey</Code></Error>", content_type="application/xml")
            return
        repo, path, e = found
        data = e["file"].read_bytes()
        if path in self.state.corrupt:
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]
        start = 0
        status = 200
        headers = {"ETag": f"\"{sha}\"", "Accept-Ranges": "bytes"}
        wanted = self.headers.get("Range")
        if wanted:
            start = int(wanted.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        if self.state.cdn_delay:
            time.sleep(self.state.cdn_delay)
        with self.state.lock:
            drop = path in self.state.drop_once
            self.state.drop_once.discard(path)
        if drop and self.command == "GET":
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.send(status, body, headers, "application/octet-stream")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--gated", action="append", default=[])
    parser.add_argument("--drop-once", action="append", default=[])
    parser.add_argument("--corrupt", action="append", default=[])
    parser.add_argument("--cdn-delay", type=float, default=0)
    parser.add_argument("--log")
    args = parser.parse_args()
    state = State(args)
    servers = []
    for name in ("hub", "cdn"):
        handler = type(f"{name}Handler", (Handler,), {"state": state, "server_name_": name})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        servers.append(server)
    state.cdn_port = servers[1].server_address[1]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print(f"hub {servers[0].server_address[1]} cdn {servers[1].server_address[1]}", flush=True)
    try:
        sys.stdin.read()  # until the test closes our stdin (or kills us)
    except KeyboardInterrupt:
        pass
    for s in servers:
        s.shutdown()


if __name__ == "__main__":
    main()
