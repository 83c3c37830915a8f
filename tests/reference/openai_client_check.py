"""`giz serve` against the official `openai` client (PyPI), on the small real default model.

usage: openai_client_check.py GIZ BUILD_DIR REPO_ROOT
       openai_client_check.py GIZ BUILD_DIR REPO_ROOT --images MODEL_FOLDER
       openai_client_check.py GIZ BUILD_DIR REPO_ROOT --klein MODEL_FOLDER PICTURE
       openai_client_check.py GIZ BUILD_DIR REPO_ROOT --vision FOLDER

Converts scripts/default-model.sh's GGUF once into BUILD_DIR/real_models/smollm2_4bits (into a
folder of its own, renamed into place, as tests/slow/real_model_test.cpp does), serves it on a
free port of 127.0.0.1 and checks models.list, chat.completions.create whole and streamed (the
deltas of a greedy request make its whole answer), completions.create, a response_format
json_schema answer (validated by the `jsonschema` package) and the client's errors.
With --images: serves the Z-Image folder (the tiny one tests/CMakeLists.txt writes) with
`giz serve --image tiny=FOLDER` and checks images.generate: the PNG decodes (Pillow) to the size
asked and to the pixels `giz paint` writes for the same prompt and seed, n images from seed + i,
and the client's errors for a size that is not a multiple of 16 and for response_format url.
With --klein: serves the klein folder (the tiny one tests/CMakeLists.txt writes) as `klein` and
checks images.generate and images.edit (one picture, and image[] of two) against `giz paint`'s
pictures (--edit) for the same prompt and seed, and the client's error for an edit without
a picture.
With --vision: serves FOLDER/model (the tiny Qwen 3.5 with its vision tower, which test_ai's
VisionServeFolder.Write puts there with picture.png and chat.json) and checks that
chat.completions.create showing picture.png as an image_url data URL, in diffusers' upsampler chat,
gives transformers' greedy answer (tests/reference/make_upsampler_vision_fixtures.py; its first
4 tokens: giz serve's slot keeps to the model's trained 256 positions, the prompt takes 252) and
prompt length, and the client's error for an https URL (the server fetches nothing).
Exits 77 (CTest's skip) when the `openai` package or the model is not installed.
"""
import json
import re
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


def cached_turns(client):
    """A shared system prompt is read once; a chat that resends its history reads only its new turn."""
    model = "smollm2_4bits"
    system = {"role": "system", "content": "You are a careful assistant for a library. " * 12}
    first = [system, {"role": "user", "content": "Where are the atlases?"}]
    answer = client.chat.completions.create(model=model, messages=first, max_tokens=12, temperature=0)
    other = client.chat.completions.create(model=model, temperature=0, max_tokens=12,
                                           messages=[system, {"role": "user", "content": "When do you open?"}])
    # The other question starts from the first chat's system prompt (its pages shared, not read).
    shared = other.usage.prompt_tokens_details.cached_tokens
    assert shared >= 100 and shared < other.usage.prompt_tokens, other.usage
    follow = first + [{"role": "assistant", "content": answer.choices[0].message.content},
                      {"role": "user", "content": "And the maps?"}]
    turn = client.chat.completions.create(model=model, messages=follow, max_tokens=12, temperature=0)
    # The follow-up reads its new turn only: what the first chat's slot kept is all still there.
    assert turn.usage.prompt_tokens_details.cached_tokens >= answer.usage.prompt_tokens, (turn.usage, answer.usage)
    print("openai client: a shared system prompt read once (", shared, "tokens cached ) and a follow-up turn read",
          turn.usage.prompt_tokens - turn.usage.prompt_tokens_details.cached_tokens, "new tokens")


def preempted_chats(client):
    """Two chats at once whose answers outgrow the pool (2 pages each, 3 in the pool): one pauses
    while the other takes the pages, and both answer as each does alone."""
    import concurrent.futures

    def ask(i):
        messages = [{"role": "user", "content": f"Write a long story about river number {i}, with many details."}]
        r = client.chat.completions.create(model="smollm2_4bits", messages=messages, max_tokens=400, temperature=0)
        return r.choices[0].message.content, r.usage.prompt_tokens + r.usage.completion_tokens

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        together = list(pool.map(ask, range(2)))
    for i, (text, tokens) in enumerate(together):
        assert text == ask(i)[0], f"chat {i} answered differently beside the other"
    print("openai client: two chats of", [t for _, t in together], "tokens in a pool of 768 answer as alone")


def features(client, openai, jsonschema, messages, whole):
    """n, seeds, system_fingerprint, logit_bias and a forced tool call streamed, as the client reads them."""
    model = "smollm2_4bits"
    assert whole.system_fingerprint and whole.system_fingerprint.startswith("fp_"), whole.system_fingerprint
    assert whole.choices[0].message.refusal is None
    many = client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=1.0, seed=3, n=2)
    assert [c.index for c in many.choices] == [0, 1], many
    assert many.usage.prompt_tokens == whole.usage.prompt_tokens, many.usage
    assert many.usage.prompt_tokens_details.cached_tokens > 0, many.usage  # the slot held this prompt
    assert len({c.message.content for c in many.choices}) > 1, [c.message.content for c in many.choices]
    # Seeded, the same request gives the same choices (batch invariance: whatever the slots held).
    again = client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=1.0, seed=3, n=2)
    assert [c.message.content for c in again.choices] == [c.message.content for c in many.choices], again
    seedless = [client.chat.completions.create(model=model, messages=messages, max_tokens=24, temperature=1.0)
                .choices[0].message.content for _ in range(2)]
    assert seedless[0] != seedless[1], seedless
    biased = client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=0,
                                            logit_bias={"0": -100})
    assert biased.choices[0].message.content is not None
    try:
        client.chat.completions.create(model=model, messages=messages, logit_bias={"0": 500})
        raise AssertionError("a logit bias of 500 was taken")
    except openai.BadRequestError as e:
        assert "logit_bias" in str(e), e

    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
              "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                               "parameters": schema}},
             {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    forced = {"type": "function", "function": {"name": "get_weather"}}
    call = client.chat.completions.create(model=model, messages=ask, tools=tools, tool_choice=forced, max_tokens=80,
                                          temperature=0).choices[0]
    assert call.finish_reason == "tool_calls", call
    assert call.message.tool_calls[0].function.name == "get_weather", call.message
    jsonschema.validate(json.loads(call.message.tool_calls[0].function.arguments), schema)
    # Streamed, accumulated by the client's own stream helper from the tool-call deltas.
    completions = client.chat.completions if hasattr(client.chat.completions, "stream") else client.beta.chat.completions
    with completions.stream(model=model, messages=ask, tools=tools, tool_choice=forced, parallel_tool_calls=False,
                            max_tokens=80, temperature=0) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    streamed = final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason == "tool_calls" and len(streamed) == 1, final
    assert streamed[0].id.startswith("call_") and streamed[0].function.name == "get_weather", streamed
    jsonschema.validate(json.loads(streamed[0].function.arguments), schema)
    assert streamed[0].function.arguments == call.message.tool_calls[0].function.arguments, (streamed, call)
    required = client.chat.completions.create(model=model, messages=ask, tools=tools, tool_choice="required",
                                              parallel_tool_calls=False, max_tokens=80, temperature=0).choices[0]
    assert len(required.message.tool_calls) == 1 and required.finish_reason == "tool_calls", required
    print("openai client: n, seeds, logit_bias, tool_choice (named, required) and streamed tool calls agree;",
          "forced call:", call.message.tool_calls[0].function.arguments)


def served_url(server):
    """The URL giz serve prints once it listens, and its `serving` line."""
    serving = ""
    deadline = time.time() + 60
    while time.time() < deadline:
        line = server.stdout.readline()
        if not line:
            break
        if line.startswith("serving"):
            serving = line
        if line.startswith("http://"):
            return line.strip(), serving
    raise AssertionError("giz serve printed no URL")


def stop(server):
    server.send_signal(signal.SIGTERM)
    try:
        code = server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        raise AssertionError("giz serve did not stop on SIGTERM")
    assert code == 0, f"giz serve exited with {code}"


def images(giz, folder):
    """images.generate against giz serve --image, equal to giz paint's picture."""
    import base64
    import io
    import tempfile
    try:
        import openai
        from PIL import Image
    except ImportError:
        skip("the openai or Pillow package is not installed (pip install -r tests/reference/requirements.txt)")
    prompt = "A red fox in fresh snow, watercolor"
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    server = subprocess.Popen([giz, "serve", "--image", f"tiny={folder}", "--image-max-side", "256", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        client = openai.OpenAI(base_url=served_url(server)[0], api_key="unused", max_retries=0, timeout=120)
        assert [m.id for m in client.models.list()] == ["tiny"]
        result = client.images.generate(model="tiny", prompt=prompt, size="64x64", response_format="b64_json", n=2,
                                        extra_body={"seed": 42})
        assert len(result.data) == 2 and result.created > 0, result
        pictures = [Image.open(io.BytesIO(base64.b64decode(d.b64_json))) for d in result.data]
        for p in pictures:
            assert p.format == "PNG" and p.mode == "RGB" and p.size == (64, 64), (p.format, p.mode, p.size)
        with tempfile.TemporaryDirectory() as tmp:
            for i, p in enumerate(pictures):
                path = os.path.join(tmp, f"{i}.png")
                subprocess.run([giz, "paint", folder, prompt, "--seed", str(42 + i), "--size", "64x64", "-o", path],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                assert Image.open(path).tobytes() == p.tobytes(), f"image {i} differs from giz paint --seed {42 + i}"
        assert pictures[0].tobytes() != pictures[1].tobytes()
        for bad, needle in [({"size": "72x64"}, "multiple of 16"), ({"size": "512x512"}, "too large"),
                            ({"response_format": "url"}, "b64_json")]:
            try:
                client.images.generate(model="tiny", prompt=prompt, **bad)
                raise AssertionError(f"{bad} was taken")
            except openai.BadRequestError as e:
                assert needle in str(e) and e.type == "invalid_request_error", e
        print("openai client: images.generate gives giz paint's pictures (n = 2, seeds 42 and 43); sizes and "
              "response_format url refused")
    finally:
        stop(server)


def paint(giz, folder, prompt, seed, size, edits=()):
    """giz paint's picture (Pillow's) for the arguments."""
    import tempfile
    from PIL import Image
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "painted.png")
        flags = [arg for picture in edits for arg in ("--edit", picture)]
        subprocess.run([giz, "paint", folder, prompt, "--seed", str(seed), "--size", size, "-o", path, *flags],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return Image.open(path).convert("RGB")


def klein(giz, folder, picture):
    """images.generate and images.edit against giz serve --image on klein, equal to giz paint's."""
    import base64
    import io
    try:
        import openai
        from PIL import Image
    except ImportError:
        skip("the openai or Pillow package is not installed (pip install -r tests/reference/requirements.txt)")
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    server = subprocess.Popen([giz, "serve", "--image", f"klein={folder}", "--image-max-side", "128", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)

    def decoded(result, size):
        assert len(result.data) == 1 and result.created > 0, result
        p = Image.open(io.BytesIO(base64.b64decode(result.data[0].b64_json)))
        assert p.format == "PNG" and p.mode == "RGB" and p.size == size, (p.format, p.mode, p.size)
        return p

    try:
        client = openai.OpenAI(base_url=served_url(server)[0], api_key="unused", max_retries=0, timeout=120)
        prompt = "A red fox in fresh snow, watercolor"
        made = client.images.generate(model="klein", prompt=prompt, size="48x32", response_format="b64_json",
                                      extra_body={"seed": 42})
        assert decoded(made, (48, 32)).tobytes() == paint(giz, folder, prompt, 42, "48x32").tobytes()
        prompt = "A lighthouse at night"
        with open(picture, "rb") as one:
            edited = client.images.edit(model="klein", image=one, prompt=prompt, size="40x36",
                                        extra_body={"seed": 7})
        assert decoded(edited, (40, 36)).tobytes() == paint(giz, folder, prompt, 7, "40x36", [picture]).tobytes()
        with open(picture, "rb") as first, open(picture, "rb") as second:
            edited = client.images.edit(model="klein", image=[first, second], prompt=prompt, size="40x36",
                                        extra_body={"seed": 7})
        want = paint(giz, folder, prompt, 7, "40x36", [picture, picture])
        assert decoded(edited, (40, 36)).tobytes() == want.tobytes()
        try:
            client.images.edit(model="klein", image=io.BytesIO(b"not a picture"), prompt=prompt)
            raise AssertionError("a picture that is none was taken")
        except openai.BadRequestError as e:
            assert "image" in str(e) and e.type == "invalid_request_error", e
        print("openai client: klein's images.generate and images.edit (one picture, image[] of two) give giz "
              "paint's pictures; a bad picture refused")
    finally:
        stop(server)


def vision(giz, folder):
    """chat.completions.create showing a picture as an image_url data URL: transformers' answer."""
    import base64
    try:
        import openai
    except ImportError:
        skip("the openai package is not installed (pip install -r tests/reference/requirements.txt)")
    with open(os.path.join(folder, "chat.json")) as f:
        chat = json.load(f)
    with open(os.path.join(folder, "picture.png"), "rb") as f:
        picture = "data:image/png;base64," + base64.b64encode(f.read()).decode()
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    server = subprocess.Popen([giz, "serve", os.path.join(folder, "model"), "--name", "vl", "--port", "0",
                               "--slots", "1", "--context", "512"], stdout=subprocess.PIPE, text=True)
    try:
        url, serving = served_url(server)
        assert "pictures" in serving, serving
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        messages = [{"role": "system", "content": chat["system"]},
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": picture}}]},
                    {"role": "user", "content": chat["prompt"]}]
        # The slot holds the model's trained 256 positions: the answer runs to their end.
        answer = client.chat.completions.create(model="vl", messages=messages, max_tokens=12, temperature=0)
        assert answer.choices[0].message.content == chat["answer"], (answer.choices[0].message.content, chat)
        assert answer.usage.prompt_tokens == chat["prompt_tokens"], answer.usage
        assert answer.choices[0].finish_reason == "length", answer.choices[0]
        fetched = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                                                {"type": "text", "text": "What is it?"}]}]
        try:
            client.chat.completions.create(model="vl", messages=fetched, max_tokens=4)
            raise AssertionError("an https picture was taken")
        except openai.BadRequestError as e:
            assert e.param == "messages[0].content[0].image_url.url" and "fetches no URLs" in str(e), e
        print("openai client: a picture as an image_url data URL gives transformers' answer", repr(chat["answer"]),
              "; an https URL refused")
    finally:
        stop(server)


def main():
    if len(sys.argv) == 6 and sys.argv[4] == "--vision":
        vision(sys.argv[1], sys.argv[5])
        return
    if len(sys.argv) == 7 and sys.argv[4] == "--klein":
        klein(sys.argv[1], sys.argv[5], sys.argv[6])
        return
    if len(sys.argv) == 6 and sys.argv[4] == "--images":
        images(sys.argv[1], sys.argv[5])
        return
    giz, build, root = sys.argv[1:4]
    try:
        import jsonschema
        import openai
    except ImportError:
        skip("the openai or jsonschema package is not installed (pip install -r tests/reference/requirements.txt)")
    folder = converted(giz, build, root)
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    # A KV pool of 3 pages for 2 slots of 2 pages each: the idle slot gives its pages up when needed.
    server = subprocess.Popen([giz, "serve", str(folder), "--port", "0", "--slots", "2", "--context", "512",
                               "--pool", "768"], stdout=subprocess.PIPE, text=True)
    try:
        url, serving = served_url(server)
        assert re.search(r"\(2 slots of 512 tokens, KV pool of 768 tokens, kv (8|4|4/2), \d+ MiB\)", serving), serving
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

        features(client, openai, jsonschema, messages, whole)
        cached_turns(client)
        preempted_chats(client)

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
        stop(server)


if __name__ == "__main__":
    main()
