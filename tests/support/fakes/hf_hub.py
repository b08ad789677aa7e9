"""A fake of the Hugging Face Hub endpoints `huggingface_hub.HfApi.upload_file` uses on a data set: preupload (which
asks how each file travels) and commit (an NDJSON body: a header line, then one line per file).

Every file is answered `regular`, so its bytes come base64-encoded inside the commit, as the Hub does for files it
does not keep in LFS/Xet; the storage protocols of large files are not faked. Errors are shaped as the Hub's are
(`X-Error-Code`, a JSON `error`), which is what huggingface_hub turns into its exceptions.
"""

from __future__ import annotations

import base64
import hashlib
import json

from tests.support.fakes.http import FakeServer, Reply, Request

TOKEN = "hf_fake_token"
REPO = "(?P<repo>[^/]+/[^/]+)"


class FakeHub(FakeServer):
    def __init__(self, datasets: tuple[str, ...] = ("kernelbot/open-data",)) -> None:
        super().__init__()
        self.datasets: dict[str, dict[str, bytes]] = {name: {} for name in datasets}
        self.commits: list[dict] = []  # {"repo", "revision", "summary", "files": {path: bytes}}
        self.route("POST", f"/api/datasets/{REPO}/preupload/(?P<revision>[^/]+)", self._preupload)
        self.route("POST", f"/api/datasets/{REPO}/commit/(?P<revision>[^/]+)", self._commit)

    def dispatch(self, request: Request) -> Reply:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return Reply(401, {"error": "Invalid credentials in Authorization header"},
                         {"X-Error-Message": "Invalid credentials in Authorization header"})
        return super().dispatch(request)

    def _repo(self, request: Request) -> dict[str, bytes] | Reply:
        found = self.datasets.get(request.params["repo"])
        if found is None:
            return Reply(404, {"error": "Repository not found"},
                         {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})
        return found

    def _preupload(self, request: Request) -> Reply:
        repo = self._repo(request)
        if isinstance(repo, Reply):
            return repo
        files = request.json().get("files")
        if not isinstance(files, list) or not all({"path", "sample", "size"} <= set(f) for f in files):
            return Reply(400, {"error": "Invalid preupload request"})
        return Reply(200, {"files": [
            {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
             "oid": hashlib.sha1(repo[f["path"]]).hexdigest() if f["path"] in repo else None}
            for f in files]})

    def _commit(self, request: Request) -> Reply:
        repo = self._repo(request)
        if isinstance(repo, Reply):
            return repo
        if not request.headers.get("content-type", "").startswith("application/x-ndjson"):
            return Reply(400, {"error": "Expected NDJSON"})
        lines = [json.loads(line) for line in request.body.decode().splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header" or not lines[0]["value"].get("summary"):
            return Reply(400, {"error": "The first line must be the commit's header, with a summary"})
        files = {}
        for line in lines[1:]:
            if line.get("key") != "file" or line["value"].get("encoding") != "base64":
                return Reply(400, {"error": f"Unsupported operation {line.get('key')!r}"})
            files[line["value"]["path"]] = base64.b64decode(line["value"]["content"])
        repo.update(files)
        oid = hashlib.sha1(json.dumps(sorted(files)).encode() + str(len(self.commits)).encode()).hexdigest()
        self.commits.append({"repo": request.params["repo"], "revision": request.params["revision"],
                             "summary": lines[0]["value"]["summary"], "files": files})
        return Reply(200, {"success": True, "commitOid": oid, "pullRequestUrl": None,
                           "commitUrl": f"{self.url}/datasets/{request.params['repo']}/commit/{oid}"})
