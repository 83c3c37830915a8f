"""giz serve under load, on 127.0.0.1 only (issue 17 point 6).

usage: serve_load.py [--quick] [--giz PATH] [--model GGUF_OR_FOLDER] [--url URL --pid PID] [--slots N]

Starts `giz serve` on the model (default: scripts/default-model.sh's SmolLM2-135M-Instruct) on a
free port, or attaches to a server already running at --url (its RSS is read when --pid names its
process). Then, each phase bounded in time:
  streams   N concurrent streamed chat completions, every event checked, until [DONE]
  vanish    clients that leave mid-stream; then a request per slot must still be answered
  slow      slow clients sending one header byte a second (reconnecting when dropped) beside
            normal clients, whose latency is measured
  bad       the deep inputs of issue 17 point 1 and malformed HTTP, each on its own connection
Clients spread over the source addresses of 127.0.0.0/8 as clients of a real server come from
many addresses. Prints requests served, errors by kind, p50/p99 latency, and the server's RSS
before, at its peak and after. A server that dies is an error kind of its own (server_dead: the
input that killed it); a started server is then restarted for the phases left.
Exits 1 when there were errors, 77 (CTest's skip) when the model is not installed.
"""
import argparse
import asyncio
import collections
import json
import multiprocessing
import pathlib
import random
import resource
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SKIP = 77


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Server:
    """The server: a started `giz serve` (restartable) or one attached to."""

    def __init__(self, args):
        self.args = args
        self.process = None
        self.pid = args.pid
        if args.url:
            rest = args.url.split("://", 1)[-1].split("/", 1)[0]
            self.host, port = rest.rsplit(":", 1)
            self.port = int(port)
            if self.host not in ("127.0.0.1", "localhost"):
                sys.exit("serve_load: only servers on 127.0.0.1")
            self.host = "127.0.0.1"
        else:
            self.start()

    def start(self):
        command = [self.args.giz, "serve", self.args.model, "--port", "0", "--slots", str(self.args.slots),
                   "--context", "512"] + self.args.serve_args
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.pid = self.process.pid
        deadline = time.time() + 300  # a first run converts the GGUF into the cache
        for line in self.process.stdout:
            if line.startswith("http://"):
                rest = line.strip().split("://", 1)[1].split("/", 1)[0]
                self.host, port = rest.rsplit(":", 1)
                self.port = int(port)
                return
            if time.time() > deadline:
                break
        self.stop()
        sys.exit("serve_load: giz serve did not start: " + " ".join(command))

    def alive(self):
        return self.process is None or self.process.poll() is None

    def rss_mb(self):
        try:
            for line in open(f"/proc/{self.pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except (OSError, TypeError):
            pass
        return float("nan")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Tally:
    def __init__(self):
        self.served = 0
        self.errors = collections.Counter()
        self.latencies = collections.defaultdict(list)  # phase -> seconds
        self.outcomes = collections.Counter()  # what slow clients got (expected, not errors)

    def ok(self, phase, seconds):
        self.served += 1
        self.latencies[phase].append(seconds)


def source(i, base):
    """A source address of 127.0.0.0/8: base.(i % 200 + 1)."""
    return f"{base}.{i % 200 + 1}"


async def connect(server, local, timeout=10):
    return await asyncio.wait_for(asyncio.open_connection(server.host, server.port, local_addr=(local, 0),
                                                          limit=1 << 20), timeout)


def request_bytes(method, path, body=b"", extra=""):
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{extra}"
    if body or method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


async def read_head(reader, timeout):
    raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return status, headers


async def read_chunks(reader, headers, timeout):
    """The body's pieces as they come (chunked or to the end)."""
    if headers.get("transfer-encoding") == "chunked":
        while True:
            size = int((await asyncio.wait_for(reader.readline(), timeout)).strip() or b"0", 16)
            if size == 0:
                return
            data = await asyncio.wait_for(reader.readexactly(size + 2), timeout)
            yield data[:-2]
    elif "content-length" in headers:
        yield await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), timeout)
    else:
        while data := await asyncio.wait_for(reader.read(65536), timeout):
            yield data


def error_kind(e):
    if isinstance(e, asyncio.TimeoutError):
        return "timeout"
    if isinstance(e, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(e, (ConnectionResetError, BrokenPipeError)):
        return "connection_reset"
    if isinstance(e, (asyncio.IncompleteReadError, asyncio.LimitOverrunError)):
        return "closed_mid_response"
    return type(e).__name__


def chat_body(text, max_tokens, stream):
    return json.dumps({"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
                       "stream": stream, "temperature": 0}).encode()


async def stream_once(server, tally, phase, local, max_tokens, vanish=False, timeout=600):
    """One streamed chat; checks every event. vanish: leave after the first content piece.
    timeout: for each read, the openai client's default (a queued request gets no byte until a
    slot takes it)."""
    start = time.monotonic()
    writer = None
    try:
        reader, writer = await connect(server, local)
        writer.write(request_bytes("POST", "/v1/chat/completions", chat_body(f"Count to {max_tokens}.", max_tokens, True)))
        await writer.drain()
        status, headers = await read_head(reader, timeout)
        if status != 200:
            tally.errors[f"{phase}: http_{status}"] += 1
            return
        pending, done = b"", False
        async for piece in read_chunks(reader, headers, timeout):
            pending += piece
            while b"\n\n" in pending:
                event, pending = pending.split(b"\n\n", 1)
                if not event.startswith(b"data: "):
                    tally.errors[f"{phase}: malformed_event"] += 1
                    return
                data = event[6:]
                if data == b"[DONE]":
                    done = True
                    continue
                chunk = json.loads(data)
                if "error" in chunk:
                    tally.errors[f"{phase}: error_event"] += 1
                    return
                if vanish and chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    writer.transport.abort()  # gone without a word (a reset)
                    tally.ok(phase, time.monotonic() - start)
                    return
        if done:
            tally.ok(phase, time.monotonic() - start)
        else:
            tally.errors[f"{phase}: no_done"] += 1
    except Exception as e:  # noqa: BLE001 - every failure is counted by its kind
        tally.errors[f"{phase}: {error_kind(e)}"] += 1
    finally:
        if writer:
            writer.transport.abort()


async def simple(server, method, path, body=b"", local="127.0.0.1", timeout=30):
    reader, writer = await connect(server, local)
    try:
        writer.write(request_bytes(method, path, body))
        await writer.drain()
        status, headers = await read_head(reader, timeout)
        data = b"".join([p async for p in read_chunks(reader, headers, timeout)])
        return status, headers, data
    finally:
        writer.transport.abort()


async def phase_streams(server, tally, n, max_tokens):
    await asyncio.gather(*(stream_once(server, tally, "streams", source(i, "127.0.2"), max_tokens) for i in range(n)))


async def phase_vanish(server, tally, n, slots):
    await asyncio.gather(*(stream_once(server, tally, "vanish", source(i, "127.0.3"), 400, vanish=True)
                           for i in range(n)))
    # Their slots are free again: one request per slot is answered.
    await asyncio.gather(*(stream_once(server, tally, "after_vanish", source(i, "127.0.3"), 8) for i in range(slots)))


async def slow_client(server, tally, local, stop_at):
    """One header byte a second; reconnects when the server drops it (as an attacker would)."""
    line = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"x" * 200 + b"\r\n\r\n"
    while time.monotonic() < stop_at:
        writer = None
        try:
            reader, writer = await connect(server, local)
            for byte in line:
                writer.write(bytes([byte]))
                await writer.drain()
                try:
                    status, _ = await asyncio.wait_for(read_head(reader, 1.0), 1.0)
                    tally.outcomes[f"slow: http_{status}"] += 1
                    break
                except asyncio.TimeoutError:
                    pass
                if time.monotonic() >= stop_at:
                    break
        except Exception as e:  # noqa: BLE001
            tally.outcomes[f"slow: {error_kind(e)}"] += 1
            await asyncio.sleep(0.2)
        finally:
            if writer:
                writer.transport.abort()


async def normal_client(server, tally, i, stop_at):
    # Half ask /health (the connection layer's own latency), half a short chat (with the model's).
    phase = "slow+health" if i % 2 else "slow+chat"
    while time.monotonic() < stop_at:
        start = time.monotonic()
        try:
            if i % 2:
                status, _, _ = await simple(server, "GET", "/health", local=source(i, "127.0.4"))
            else:
                status, _, _ = await simple(server, "POST", "/v1/chat/completions", chat_body("Hi", 4, False),
                                            local=source(i, "127.0.4"))
            if status == 200:
                tally.ok(phase, time.monotonic() - start)
            else:
                tally.errors[f"{phase}: http_{status}"] += 1
        except Exception as e:  # noqa: BLE001
            tally.errors[f"{phase}: {error_kind(e)}"] += 1
        await asyncio.sleep(0.05)


def slow_process(host, port, n, seconds, results):
    """The slow clients, in a process of their own: sharing the normal clients' event loop, their
    thousand timers would add the loop's delays to the latencies measured."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    target = argparse.Namespace(host=host, port=port)
    tally = Tally()

    async def all_of_them():
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(slow_client(target, tally, source(i, "127.0.5") if i % 2 else source(i, "127.0.6"),
                                           stop_at) for i in range(n)))

    asyncio.run(all_of_them())
    results.put(dict(tally.outcomes))


async def phase_slow(server, tally, n, normal, seconds):
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    warm = min(2.0, seconds / 4)
    slow = context.Process(target=slow_process, args=(server.host, server.port, n, seconds + warm, results))
    slow.start()
    await asyncio.sleep(warm)  # the slow ones are in first
    stop_at = time.monotonic() + seconds
    await asyncio.gather(*(normal_client(server, tally, i, stop_at) for i in range(normal)))
    outcomes = await asyncio.get_running_loop().run_in_executor(None, lambda: results.get(timeout=60))
    tally.outcomes.update(outcomes)
    slow.join(10)


def nested(depth, open_, close, inner="0"):
    return open_ * depth + inner + close * depth


def bad_inputs():
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}

    def body(extra, messages=None):
        j = dict(chat, **extra)
        if messages is not None:
            j["messages"] = messages
        return json.dumps(j)

    schema = nested(5000, '{"type": "array", "items": ', "}", '{"type": "integer"}')
    parameters = nested(10000, '{"a": ', "}")
    arguments = nested(30000, "[", "]")
    deep = [
        ("response_format.json_schema.schema x5000",
         body({}).replace('"max_tokens"', '"response_format": {"type": "json_schema", "json_schema": {"name": "x", '
                          '"schema": ' + schema + '}}, "max_tokens"')),
        ("tools[].function.parameters x10000",
         body({}).replace('"max_tokens"', '"tools": [{"type": "function", "function": {"name": "f", "parameters": '
                          + parameters + '}}], "max_tokens"')),
        ("tool_calls[].function.arguments x30000",
         body({}, [{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": None, "tool_calls": [
                       {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "ok"}])),
        ("chat_template_kwargs x30000",
         body({}).replace('"max_tokens"', '"chat_template_kwargs": {"x": ' + nested(30000, "[", "]") + '}, "max_tokens"')),
        ("unknown key in a message x100000",
         body({}).replace('"content": "hi"', '"content": "hi", "extra": ' + nested(100000, "[", "]"))),
    ]
    cases = [(name, request_bytes("POST", "/v1/chat/completions", text.encode()), (400, 499)) for name, text in deep]
    h = "Host: x\r\n"
    malformed = [
        ("garbage request line", b"GARBAGE\r\n\r\n"),
        ("no Host", b"GET /v1/models HTTP/1.1\r\n\r\n"),
        ("target 9000 bytes", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + h.encode() + b"\r\n"),
        ("header 40 KiB", b"GET / HTTP/1.1\r\n" + h.encode() + b"X-Big: " + b"b" * 40000 + b"\r\n\r\n"),
        ("200 headers", b"GET / HTTP/1.1\r\n" + h.encode() + b"".join(b"X-%d: y\r\n" % i for i in range(200)) + b"\r\n"),
        ("Content-Length 1e9", b"POST /v1/completions HTTP/1.1\r\n" + h.encode() + b"Content-Length: 999999999\r\n\r\n"),
        ("chunked body", b"POST /v1/completions HTTP/1.1\r\n" + h.encode() + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("two Content-Lengths", b"POST /v1/completions HTTP/1.1\r\n" + h.encode() +
         b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        ("NUL in a header", b"GET / HTTP/1.1\r\nHost: x\x00y\r\n\r\n"),
        ("folded header", b"GET / HTTP/1.1\r\n" + h.encode() + b" folded\r\n\r\n"),
        ("bare CR", b"GET / HTTP/1.1\rHost: x\r\n\r\n"),
        ("body not JSON", request_bytes("POST", "/v1/chat/completions", b'{"messages": [')),
        ("random bytes", bytes(random.Random(17).randrange(256) for _ in range(2000)) + b"\r\n\r\n"),
    ]
    return cases + [(name, data, (400, 499)) for name, data in malformed] + [
        ("HTTP/2.0", b"GET / HTTP/2.0\r\n" + h.encode() + b"\r\n", (505, 505))]


async def phase_bad(server, tally):
    for name, data, (low, high) in bad_inputs():
        start = time.monotonic()
        try:
            reader, writer = await connect(server, "127.0.0.7")
            try:
                writer.write(data)
                await writer.drain()
                status, _ = await read_head(reader, 60)
            finally:
                writer.transport.abort()
            if low <= status <= high:
                tally.ok("bad", time.monotonic() - start)
                tally.outcomes[f"bad: {name}: {status}"] += 1
            else:
                tally.errors[f"bad: {name}: http_{status} (expected {low}..{high})"] += 1
        except Exception as e:  # noqa: BLE001
            await asyncio.sleep(0.5)
            if not server.alive() or not await healthy(server):
                tally.errors[f"server_dead: {name}"] += 1
                if server.process is None:
                    return  # attached: nothing left to test
                server.stop()
                server.start()
            else:
                tally.errors[f"bad: {name}: {error_kind(e)}"] += 1


async def healthy(server):
    try:
        status, _, _ = await simple(server, "GET", "/health", timeout=5)
        return status == 200
    except Exception:  # noqa: BLE001
        return False


async def sample_rss(server, peak, stop):
    """peak: phase -> the most RSS seen while it ran (peak["phase"] names the one running)."""
    while not stop.is_set():
        rss = server.rss_mb()
        if rss == rss:  # not NaN
            peak[peak["phase"]] = max(peak.get(peak["phase"], 0.0), rss)
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
        except asyncio.TimeoutError:
            pass


async def run(args, server):
    tally = Tally()
    q = args.quick
    streams, vanish, slow, normal, seconds, tokens = (8, 6, 40, 4, 4, 4) if q else (1000, 200, 1000, 16, 30, 16)
    rss_before = server.rss_mb()
    peak, stop = {"phase": "streams"}, asyncio.Event()
    sampler = asyncio.create_task(sample_rss(server, peak, stop))
    timings, rss_after_load, first_pid = {}, float("nan"), server.pid
    for name, phase in [("streams", phase_streams(server, tally, streams, tokens)),
                        ("vanish", phase_vanish(server, tally, vanish, args.slots)),
                        ("slow", phase_slow(server, tally, slow, normal, seconds)),
                        ("bad", phase_bad(server, tally))]:
        if name == "bad":  # the load is over: what the server keeps once its clients are gone
            peak["phase"] = "settle"
            await asyncio.sleep(1 if q else 3)
            rss_after_load = server.rss_mb()
        begin = time.monotonic()
        peak["phase"] = name
        try:
            await asyncio.wait_for(phase, 60 if q else 900)
        except asyncio.TimeoutError:
            tally.errors[f"{name}: phase_timeout"] += 1
        timings[name] = time.monotonic() - begin
        if not server.alive():
            tally.errors[f"server_dead: after {name}"] += 1
            server.start()
    stop.set()
    await sampler
    rss_after = server.rss_mb()

    print(f"serve_load{' --quick' if q else ''}: {streams} streams of {tokens} tokens, {vanish} vanishing, {slow} slow clients beside "
          f"{normal} normal ones for {seconds} s, {len(bad_inputs())} bad inputs")
    print(f"requests served: {tally.served}")
    for phase, values in tally.latencies.items():
        print(f"  {phase:13s} {len(values):5d} served  p50 {percentile(values, 50) * 1000:8.1f} ms"
              f"  p99 {percentile(values, 99) * 1000:8.1f} ms")
    print("phases: " + ", ".join(f"{name} {t:.1f} s (peak RSS {peak.get(name, float('nan')):.1f} MiB)"
                                 for name, t in timings.items()))
    print(f"errors: {sum(tally.errors.values())}")
    for kind, count in sorted(tally.errors.items()):
        print(f"  {count:5d}  {kind}")
    print("answers to slow clients and bad inputs:")
    for kind, count in sorted(tally.outcomes.items()):
        print(f"  {count:5d}  {kind}")
    highest = max([v for k, v in peak.items() if k != "phase"] + [rss_before])
    restarted = " (of the server restarted after a crash)" if server.pid != first_pid else ""
    print(f"server RSS: before {rss_before:.1f} MiB, peak {highest:.1f} MiB, after the load {rss_after_load:.1f} MiB,"
          f" after the bad inputs {rss_after:.1f} MiB{restarted}")
    return 1 if tally.errors else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small counts, a few seconds (CI)")
    parser.add_argument("--giz", default=str(ROOT / "build" / "release" / "giz"))
    parser.add_argument("--model", help="default: scripts/default-model.sh")
    parser.add_argument("--url", help="attach to a running server (127.0.0.1) instead of starting one")
    parser.add_argument("--pid", type=int, help="the attached server's process, for its RSS")
    parser.add_argument("--slots", type=int, default=16, help="giz serve --slots (default 16; --quick: at most 4)")
    parser.add_argument("serve_args", nargs="*", help="more giz serve flags, after --")
    args = parser.parse_args()
    if args.quick and not args.url:
        args.serve_args = ["--head-timeout", "1"] + args.serve_args  # so that the short slow phase sees 408s
        args.slots = min(args.slots, 4)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a socket for each client
    if not args.url and not args.model:
        found = subprocess.run([str(ROOT / "scripts" / "default-model.sh")], capture_output=True, text=True)
        if found.returncode != 0 or not found.stdout.strip():
            print("SKIP: the default model is not installed (scripts/setup.sh): " + found.stderr.strip())
            sys.exit(SKIP)
        args.model = found.stdout.strip()
    server = Server(args)
    try:
        sys.exit(asyncio.run(run(args, server)))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
