"""giz against tests/hub/fake_hub.py: names fetched, checked, resumed, cached and converted.

usage: hub_test.py SCENARIO GIZ REPO_ROOT
SCENARIO: first_run (SmolLM2's real GGUF: download, convert, answer; then offline), resume,
corrupt, gated, offline, concurrent, pipeline (a diffusers repository), interop (huggingface_hub, the hub's own client, reads our
cache and we read its). Exits 77 (CTest's skip) when what a scenario needs is not installed.
References: hashlib for every SHA-256, huggingface_hub for the cache layout.
"""
import hashlib
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile

SKIP = 77
HERE = pathlib.Path(__file__).resolve().parent
TINY = "test-org/tiny"


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


class FakeHub:
    def __init__(self, root, *options):
        self.log = pathlib.Path(root).parent / f"log{id(self)}.jsonl"
        self.process = subprocess.Popen([sys.executable, str(HERE / "fake_hub.py"), str(root), "--log", str(self.log), *options],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        words = self.process.stdout.readline().split()
        check(len(words) == 4, f"fake hub did not start: {words}")
        self.endpoint = f"http://127.0.0.1:{words[1]}"

    def requests(self):
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def stop(self):
        self.process.stdin.close()
        self.process.wait(timeout=10)


class Case:
    def __init__(self, giz, root):
        self.giz = giz
        self.root = pathlib.Path(root)
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="giz-hub-"))
        self.repos = self.tmp / "repos"
        self.cache = self.tmp / "hub"

    def env(self, endpoint, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE", "TRANSFORMERS_"))}
        env.update(HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(self.cache), XDG_CACHE_HOME=str(self.tmp / "xdg"),
                   HOME=str(self.tmp / "home"))
        env.update(extra)
        return env

    def giz_run(self, args, endpoint, **extra):
        return subprocess.run([self.giz, *args], env=self.env(endpoint, **extra), capture_output=True, text=True, timeout=300)

    def tiny_repo(self):
        folder = self.repos / TINY
        folder.mkdir(parents=True)
        for f in (self.root / "tests" / "data" / "llm" / "tiny_hf").iterdir():
            shutil.copy(f, folder / f.name)
        (folder / "README.md").write_text("# tiny\nnot a file a model needs\n")
        return folder

    def repo_folder(self, repo):
        return self.cache / ("models--" + repo.replace("/", "--"))

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def check_cache(case, repo, source):
    """Every LFS blob is named by its hashlib SHA-256, every snapshot file links to a blob, no .incomplete."""
    folder = case.repo_folder(repo)
    commit = (folder / "refs" / "main").read_text()
    check(len(commit) == 40, f"refs/main holds {commit!r}")
    snapshot = folder / "snapshots" / commit
    files = sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file())
    for path in files:
        link = snapshot / path
        check(link.is_symlink(), f"{path} is not a link")
        blob = link.resolve()
        check(blob.parent == (folder / "blobs").resolve(), f"{path} links outside blobs/: {blob}")
        check(blob.read_bytes() == (source / path).read_bytes(), f"{path}: bytes differ from the hub's")
        if path.endswith((".safetensors", ".gguf")):
            check(blob.name == sha256(source / path), f"{path}: blob {blob.name} is not its sha256")
    check(not list((folder / "blobs").glob("*.incomplete")), "an .incomplete file is left")
    return commit, files


def converted_folders(case):
    return sorted(p.parent for p in (case.tmp / "xdg" / "gizml" / "models").rglob("manifest.json"))


def scenario_first_run(case):
    found = subprocess.run([str(case.root / "scripts" / "default-model.sh")], capture_output=True, text=True)
    if found.returncode != 0:
        print("SKIP:", found.stderr.strip())
        sys.exit(SKIP)
    repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    folder = case.repos / repo
    folder.mkdir(parents=True)
    (folder / "SmolLM2-135M-Instruct.Q4_1.gguf").symlink_to(found.stdout.strip())
    (folder / "SmolLM2-135M-Instruct.Q8_0.gguf").write_bytes(b"GGUF another quantization, never fetched")
    (folder / "README.md").write_text("# SmolLM2 GGUF\n")
    hub = FakeHub(case.repos)
    prompt = ["What is the capital of France?", "--max-tokens", "12"]
    first = case.giz_run(["run", repo + ":q4_1", *prompt], hub.endpoint)
    check(first.returncode == 0, f"first run failed: {first.stderr}")
    print("answer:", first.stdout.strip())
    # The reference: the same GGUF named by its local path (converted the way giz always did).
    local = case.giz_run(["run", found.stdout.strip(), *prompt], "http://127.0.0.1:9", HF_HUB_OFFLINE="1")
    check(local.returncode == 0 and first.stdout.strip() and first.stdout == local.stdout,
          f"answers differ: by name {first.stdout!r}, by path {local.stdout!r}")
    check("converting" in first.stderr, "the first run did not convert")
    commit, files = check_cache(case, repo, folder)
    check(files == ["SmolLM2-135M-Instruct.Q4_1.gguf"], f"fetched {files}, not only the chosen GGUF")
    fetched = [r["path"] for r in hub.requests() if r["server"] == "hub" and "/resolve/" in r["path"]]
    check(fetched == [f"/{repo}/resolve/{commit}/SmolLM2-135M-Instruct.Q4_1.gguf"], f"resolve requests: {fetched}")
    check(len([p for p in converted_folders(case) if "hub" in p.parts]) == 1, f"conversions: {converted_folders(case)}")
    hub.stop()
    # Again with the hub gone: offline by the hub's variable, then without it (the cached ref is used).
    for extra in ({"HF_HUB_OFFLINE": "1"}, {}):
        again = case.giz_run(["run", repo + ":Q4_1", *prompt], hub.endpoint, **extra)
        check(again.returncode == 0, f"second run ({extra}) failed: {again.stderr}")
        check(again.stdout == first.stdout, f"second answer differs: {again.stdout!r}")
        check("converting" not in again.stderr and "download" not in again.stderr, f"second run worked again: {again.stderr}")
    # --bits picks another conversion, from the same download.
    eight = case.giz_run(["run", repo + ":Q4_1", *prompt, "--bits", "8"], hub.endpoint, HF_HUB_OFFLINE="1")
    check(eight.returncode == 0 and "converting" in eight.stderr, f"--bits 8: {eight.stderr}")
    check(sorted(p.name for p in converted_folders(case) if "hub" in p.parts) == ["SmolLM2-135M-Instruct.Q4_1.gguf-4bits",
                                                                               "SmolLM2-135M-Instruct.Q4_1.gguf-8bits"],
          f"{converted_folders(case)}")


def scenario_resume(case):
    source = case.tiny_repo()
    shard1, shard2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    # An earlier process left half of shard 2; the hub drops shard 1's connection halfway once.
    blobs = case.repo_folder(TINY) / "blobs"
    blobs.mkdir(parents=True)
    data2 = (source / shard2).read_bytes()
    (blobs / (sha256(source / shard2) + ".incomplete")).write_bytes(data2[: len(data2) // 3])
    hub = FakeHub(case.repos, "--drop-once", shard1)
    pulled = case.giz_run(["pull", TINY], hub.endpoint)
    check(pulled.returncode == 0, f"pull failed: {pulled.stderr}")
    hub.stop()
    commit, files = check_cache(case, TINY, source)
    expected = ["config.json", "model.safetensors.index.json", shard1, shard2, "tokenizer.json", "tokenizer_config.json"]
    check(files == sorted(expected), f"fetched {files}")
    cdn = [r for r in hub.requests() if r["server"] == "cdn"]
    one = [r["range"] for r in cdn if r["path"].endswith(sha256(source / shard1))]
    half = len((source / shard1).read_bytes()) // 2
    check(one == [None, f"bytes={half}-"], f"shard 1 requests: {one} (a Range request from byte {half} expected)")
    two = [r["range"] for r in cdn if r["path"].endswith(sha256(source / shard2))]
    check(two == [f"bytes={len(data2) // 3}-"], f"shard 2 requests: {two}")
    check(not any(r["auth"] for r in cdn), "a token went to the CDN")
    check(len(converted_folders(case)) == 1, "not converted")
    print("resumed shard 1 from byte", half, "and shard 2 from byte", len(data2) // 3)


def scenario_corrupt(case):
    source = case.tiny_repo()
    shard2 = "model-00002-of-00002.safetensors"
    hub = FakeHub(case.repos, "--corrupt", shard2)
    pulled = case.giz_run(["pull", TINY], hub.endpoint)
    hub.stop()
    check(pulled.returncode == 1, f"a corrupted file was accepted: {pulled.stdout} {pulled.stderr}")
    data = bytearray((source / shard2).read_bytes())
    data[len(data) // 2] ^= 0xFF
    got = hashlib.sha256(data).hexdigest()
    want = f"{shard2}: sha256 mismatch: expected {sha256(source / shard2)}, got {got}"
    check(want in pulled.stderr, f"no checksum error naming file, expected and got: {pulled.stderr}")
    blobs = case.repo_folder(TINY) / "blobs"
    check(not (blobs / sha256(source / shard2)).exists(), "the corrupted blob is in the cache")
    check(not list(blobs.glob("*.incomplete")), "the corrupted download was kept")
    snapshots = list((case.repo_folder(TINY) / "snapshots").rglob(shard2))
    check(not snapshots, f"the corrupted file is linked: {snapshots}")
    check(not converted_folders(case), "converted a corrupted model")
    print(pulled.stderr.strip().splitlines()[-1])


def scenario_gated(case):
    source = case.tiny_repo()
    hub = FakeHub(case.repos, "--gated", f"{TINY}=hf_secret")
    anonymous = case.giz_run(["pull", TINY], hub.endpoint)
    check(anonymous.returncode == 1 and "gated or private repository (HTTP 401 GatedRepo)" in anonymous.stderr
          and "set HF_TOKEN" in anonymous.stderr, f"anonymous: {anonymous.stderr}")
    wrong = case.giz_run(["pull", TINY], hub.endpoint, HF_TOKEN="hf_wrong")
    check(wrong.returncode == 1 and "HTTP 403" in wrong.stderr and "no access" in wrong.stderr, f"wrong token: {wrong.stderr}")
    missing = case.giz_run(["pull", "test-org/none"], hub.endpoint)
    check(missing.returncode == 1 and "no such repository" in missing.stderr, f"missing repo: {missing.stderr}")
    revision = case.giz_run(["pull", TINY + "@v9"], hub.endpoint, HF_TOKEN="hf_secret")
    check(revision.returncode == 1 and "no such revision" in revision.stderr, f"missing revision: {revision.stderr}")
    given = case.giz_run(["pull", TINY], hub.endpoint, HF_TOKEN="hf_secret")
    check(given.returncode == 0, f"with HF_TOKEN: {given.stderr}")
    check_cache(case, TINY, source)
    # The token file of `hf auth login` ($HF_TOKEN_PATH here), into a fresh cache.
    token_file = case.tmp / "token"
    token_file.write_text("hf_secret\n")
    case.cache = case.tmp / "hub2"
    stored = case.giz_run(["pull", TINY], hub.endpoint, HF_TOKEN_PATH=str(token_file))
    check(stored.returncode == 0, f"with the token file: {stored.stderr}")
    hub.stop()
    hub_requests = [r for r in hub.requests() if r["server"] == "hub"]
    check(all(r["auth"] for r in hub_requests[-3:]), "the token file's token was not sent to the hub")
    check(not any(r["auth"] for r in hub.requests() if r["server"] == "cdn"), "a token went to the CDN")
    print(anonymous.stderr.strip())


def scenario_offline(case):
    case.tiny_repo()
    nothing = case.giz_run(["run", TINY, "Hi"], "http://127.0.0.1:9", HF_HUB_OFFLINE="1")
    check(nothing.returncode == 1 and "HF_HUB_OFFLINE is set and test-org/tiny is not in the cache" in nothing.stderr
          and "cached models: none" in nothing.stderr, f"offline, empty cache: {nothing.stderr}")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    unreachable = case.giz_run(["pull", TINY], closed)
    check(unreachable.returncode == 1 and f"cannot reach {closed}" in unreachable.stderr
          and "cached models: none" in unreachable.stderr, f"no network: {unreachable.stderr}")
    hub = FakeHub(case.repos)
    check(case.giz_run(["pull", TINY], hub.endpoint).returncode == 0, "pull failed")
    hub.stop()
    before = len(hub.requests())
    listed = case.giz_run(["list"], closed, HF_HUB_OFFLINE="1")
    check(listed.returncode == 0 and TINY in listed.stdout and "safetensors" in listed.stdout
          and "converted" in listed.stdout, f"giz list: {listed.stdout} {listed.stderr}")
    other = case.giz_run(["pull", "test-org/other"], closed)
    check(other.returncode == 1 and "cached models: test-org/tiny" in other.stderr, f"no network, a cache: {other.stderr}")
    cached = case.giz_run(["pull", TINY], closed, HF_HUB_OFFLINE="1")
    check(cached.returncode == 0 and "converted:" in cached.stdout, f"offline with the cache: {cached.stderr}")
    check(len(hub.requests()) == before, "offline touched the hub")
    removed = case.giz_run(["rm", TINY], closed)
    check(removed.returncode == 0, f"giz rm: {removed.stderr}")
    check(not case.repo_folder(TINY).exists() and not converted_folders(case), "giz rm left files")
    print(listed.stdout.strip())


def scenario_concurrent(case):
    source = case.tiny_repo()
    hub = FakeHub(case.repos, "--cdn-delay", "1")
    cmd = lambda: subprocess.Popen([case.giz, "pull", TINY], env=case.env(hub.endpoint), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
    both = [cmd(), cmd()]
    outs = [p.communicate(timeout=120) for p in both]
    hub.stop()
    for p, (out, err) in zip(both, outs):
        check(p.returncode == 0, f"a pull failed: {err}")
    check(any("waiting for another process" in err for _, err in outs), f"neither waited: {[e for _, e in outs]}")
    check_cache(case, TINY, source)
    cdn = [r["path"] for r in hub.requests() if r["server"] == "cdn" and r["method"] == "GET"]
    check(sorted(cdn) == sorted(set(cdn)) and len(cdn) == 2, f"the LFS files were fetched {cdn}, not once each")
    check(len(converted_folders(case)) == 1, "conversions")
    check(not list((case.tmp / "xdg").rglob("*.partial*")), "a partial conversion is left")


def scenario_pipeline(case):
    """A diffusers pipeline (Z-Image-Turbo's layout): model_index.json first, then only its components' files."""
    folder = case.repos / "test-org" / "pipe"
    index = {"_class_name": "ZImagePipeline", "_diffusers_version": "0.36.0", "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
             "text_encoder": ["transformers", "Qwen3Model"], "tokenizer": ["transformers", "Qwen2Tokenizer"],
             "transformer": ["diffusers", "ZImageTransformer2DModel"], "vae": ["diffusers", "AutoencoderKL"]}
    files = {"model_index.json": json.dumps(index), "README.md": "# pipe", "assets/showcase.jpg": "jpeg",
             "single_file.safetensors": "a root checkpoint", "scheduler/scheduler_config.json": "{}",
             "text_encoder/config.json": "{}", "text_encoder/model.safetensors": "weights",
             "tokenizer/tokenizer.json": "{}", "tokenizer/merges.txt": "a b", "transformer/config.json": "{}",
             "transformer/diffusion_pytorch_model.safetensors": "weights", "vae/config.json": "{}",
             "vae/diffusion_pytorch_model.safetensors": "weights"}
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text if path == "model_index.json" else text + path)  # distinct blobs
    hub = FakeHub(case.repos)
    pulled = case.giz_run(["pull", "test-org/pipe"], hub.endpoint)
    hub.stop()
    check(pulled.returncode == 0 and "a diffusion pipeline" in pulled.stdout, f"pull: {pulled.stdout} {pulled.stderr}")
    commit, fetched = check_cache(case, "test-org/pipe", folder)
    wanted = sorted(p for p in files if p not in ("README.md", "assets/showcase.jpg", "single_file.safetensors"))
    check(fetched == wanted, f"fetched {fetched}")
    run = case.giz_run(["run", "test-org/pipe", "Hi"], hub.endpoint)
    check(run.returncode == 1 and "is a diffusion pipeline" in run.stderr, f"run on a pipeline: {run.stderr}")


def scenario_interop(case):
    try:
        import huggingface_hub  # noqa: F401  (only to know it is there; it runs in a child with our env)
    except ImportError:
        print("SKIP: huggingface_hub is not installed")
        sys.exit(SKIP)
    source = case.tiny_repo()
    hub = FakeHub(case.repos)
    # huggingface_hub fetches two files into the cache; giz pull then fetches only the others.
    script = ("import huggingface_hub as h\n"
              f"h.hf_hub_download('{TINY}', 'config.json')\n"
              f"h.hf_hub_download('{TINY}', 'model-00001-of-00002.safetensors')\n")
    theirs = subprocess.run([sys.executable, "-c", script], env=case.env(hub.endpoint), capture_output=True, text=True)
    check(theirs.returncode == 0, f"huggingface_hub against the fake hub: {theirs.stderr}")
    before = len(hub.requests())
    pulled = case.giz_run(["pull", TINY], hub.endpoint)
    check(pulled.returncode == 0, f"giz pull: {pulled.stderr}")
    ours = [r["path"] for r in hub.requests()[before:] if "/resolve" in r["path"] or r["server"] == "cdn"]
    check(not any(p.endswith(("/config.json", "/model-00001-of-00002.safetensors")) or sha256(source / "model-00001-of-00002.safetensors") in p
                  for p in ours), f"giz fetched again what huggingface_hub had: {ours}")
    check_cache(case, TINY, source)
    # huggingface_hub reads our files from the cache, offline, and its scan finds no warning.
    script = ("import huggingface_hub as h\n"
              f"p = h.hf_hub_download('{TINY}', 'model-00002-of-00002.safetensors', local_files_only=True)\n"
              "print(p)\n"
              "info = h.scan_cache_dir()\n"
              "assert not info.warnings, info.warnings\n"
              f"repo = [r for r in info.repos if r.repo_id == '{TINY}'][0]\n"
              "print(len(list(repo.revisions)[0].files))\n")
    read = subprocess.run([sys.executable, "-c", script], env=case.env(hub.endpoint, HF_HUB_OFFLINE="1"),
                          capture_output=True, text=True)
    hub.stop()
    check(read.returncode == 0, f"huggingface_hub reading our cache: {read.stderr}")
    lines = read.stdout.split()
    check(pathlib.Path(lines[0]).read_bytes() == (source / "model-00002-of-00002.safetensors").read_bytes(), "wrong bytes")
    check(lines[1] == "6", f"huggingface_hub sees {lines[1]} files")


def main():
    scenario, giz, root = sys.argv[1:4]
    case = Case(giz, root)
    try:
        globals()["scenario_" + scenario](case)
    finally:
        case.cleanup()
    print("OK", scenario)


if __name__ == "__main__":
    main()
