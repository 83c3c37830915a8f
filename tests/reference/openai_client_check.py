"""`giz serve` against the official `openai` client (PyPI), on the small real default model.

usage: openai_client_check.py GIZ BUILD_DIR REPO_ROOT

Converts scripts/default-model.sh's GGUF once into BUILD_DIR/real_models/smollm2_4bits (into a
folder of its own, renamed into place, as tests/slow/real_model_test.cpp does), serves it on a
free port of 127.0.0.1 and checks models.list, chat.completions.create whole and streamed (the
deltas of a greedy request make its whole answer), completions.create, a response_format
json_schema answer (validated by the `jsonschema` package) and the client's errors.
Exits 77 (CTest's skip) when the `openai` package or the model is not installed.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

SKIP = 77


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def converted(giz, build, root):
    folder = pathlib.Path(build) / "real_models" / "smollm2_4bits"
    if (folder / "manifest.json").exists():
        return folder
    found = subprocess.run([str(pathlib.Path(root) / "scripts" / "default-model.sh")], capture_output=True, text=True)
    gguf = found.stdout.strip()
    if found.returncode != 0 or not gguf:
        skip("the default model is not installed (scripts/setup.sh): " + found.stderr.strip())
    mine = folder.with_name(f"{folder.name}.part{os.getpid()}")
    shutil.rmtree(mine, ignore_errors=True)
    mine.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([giz, "convert", gguf, str(mine)], check=True, stdout=subprocess.DEVNULL)
    try:
        mine.rename(folder)
    except OSError:  # another test renamed its copy first: theirs is as good
        shutil.rmtree(mine, ignore_errors=True)
    return folder


def main():
    giz, build, root = sys.argv[1:4]
    try:
        import jsonschema
        import openai
    except ImportError:
        skip("the openai or jsonschema package is not installed (pip install -r tests/reference/requirements.txt)")
    folder = converted(giz, build, root)
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    server = subprocess.Popen([giz, "serve", str(folder), "--port", "0", "--slots", "2", "--context", "512"],
                              stdout=subprocess.PIPE, text=True)
    try:
        url = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            if line.startswith("http://"):
                url = line.strip()
                break
        assert url, "giz serve printed no URL"
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60)

        models = [m.id for m in client.models.list()]
        assert models == ["smollm2_4bits"], models

        messages = [{"role": "user", "content": "Name three rivers."}]
        whole = client.chat.completions.create(model="smollm2_4bits", messages=messages, max_tokens=24, temperature=0)
        choice = whole.choices[0]
        assert whole.object == "chat.completion" and choice.message.role == "assistant", whole
        assert isinstance(choice.message.content, str) and choice.message.content, whole
        assert choice.finish_reason in ("stop", "length"), choice.finish_reason
        assert whole.usage.completion_tokens <= 24 and whole.usage.prompt_tokens > 0, whole.usage
        assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens

        stream = client.chat.completions.create(model="smollm2_4bits", messages=messages, max_tokens=24,
                                                temperature=0, stream=True, stream_options={"include_usage": True})
        text, finish, usage = "", None, None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for c in chunk.choices:
                text += c.delta.content or ""
                finish = c.finish_reason or finish
        assert text == choice.message.content, (text, choice.message.content)
        assert finish == choice.finish_reason and usage.completion_tokens == whole.usage.completion_tokens

        completion = client.completions.create(model="smollm2_4bits", prompt="The capital of France is",
                                               max_tokens=8, temperature=0, logprobs=2)
        assert completion.object == "text_completion" and completion.choices[0].text, completion
        assert len(completion.choices[0].logprobs.tokens) == completion.usage.completion_tokens

        schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                                   "age": {"type": "integer"}, "city": {"type": "string", "maxLength": 40}},
                  "required": ["name", "age"], "additionalProperties": False}
        structured = client.chat.completions.create(
            model="smollm2_4bits", max_tokens=120, temperature=0,
            messages=[{"role": "user", "content": "Invent a person. Answer in JSON with name, age and city."}],
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}})
        answer = structured.choices[0].message.content
        assert structured.choices[0].finish_reason == "stop", (structured.choices[0].finish_reason, answer)
        jsonschema.validate(json.loads(answer), schema)

        try:
            client.chat.completions.create(model="no-such-model", messages=messages)
            raise AssertionError("an unknown model was served")
        except openai.NotFoundError:
            pass
        try:
            client.chat.completions.create(model="smollm2_4bits", messages=messages, temperature="hot")
            raise AssertionError("a bad temperature was taken")
        except openai.BadRequestError as e:
            assert "temperature" in str(e), e
        print("openai client: models, chat (whole, streamed), completions, json_schema and errors agree with giz serve")
        print("structured answer:", answer)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            raise AssertionError("giz serve did not stop on SIGTERM")
    assert code == 0, f"giz serve exited with {code}"


if __name__ == "__main__":
    main()
