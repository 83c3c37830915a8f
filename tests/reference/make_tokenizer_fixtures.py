#!/usr/bin/env python3
"""Builds the tokenizer fixtures in tests/data/tokenizer/ with the `tokenizers` package.

A deterministic corpus (about 250 KB: Python standard-library sources and docstrings, hand-written
multilingual text, generated text in many scripts, emoji, whitespace runs, numbers, special-token
text, NFD text) is split into documents; each of the qwen3, llama3 and gemma3 tokenizers in
shared/data/tokenizers encodes every document without special tokens.

Files (all integers are unsigned LEB128 varints):
  corpus.bin     count, then per document: byte length, UTF-8 bytes
  <name>.ids     count, then per document: id count, ids, then the length of the text the
                 `tokenizers` package decodes the ids to, 0 when it is the document itself, else
                 that text's length + 1 followed by its bytes
Run: .venv/bin/python tests/reference/make_tokenizer_fixtures.py
"""
import inspect
import os
import pathlib
import random
import unicodedata

os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data" / "tokenizers"
OUT = ROOT / "tests" / "data" / "tokenizer"
TOKENIZERS = ["qwen3", "llama3", "gemma3"]

MULTILINGUAL = [
    "All human beings are born free and equal in dignity and rights. They're endowed with reason "
    "and conscience and should act towards one another in a spirit of brotherhood. I'LL SAY IT'S "
    "TRUE, we've been told; you'd think they'd know.",
    "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und "
    "Gewissen begabt und sollen einander im Geist der Brüderlichkeit begegnen. Äpfel, Öl, Übermut, "
    "Straße, Fußgängerübergänge.",
    "Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont doués de "
    "raison et de conscience et doivent agir les uns envers les autres dans un esprit de fraternité. "
    "L'été à l'hôpital, c'est déjà ça — « très bien ».",
    "Todos los seres humanos nacen libres e iguales en dignidad y derechos. ¿Dónde está la "
    "biblioteca? ¡Mañana será otro día! Pingüino, corazón, acción.",
    "Все люди рождаются свободными и равными в своем достоинстве и правах. Они наделены разумом и "
    "совестью и должны поступать в отношении друг друга в духе братства. Съешь же ещё этих мягких "
    "французских булок, да выпей чаю.",
    "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα δικαιώματα. "
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。"
    "今天天气很好，我们去公园散步吧！这是一个测试：中文、标点符号，以及数字１２３和123。",
    "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。"
    "人間は、理性と良心とを授けられており、互いに同胞の精神をもって行動しなければならない。"
    "カタカナとひらがな、そして漢字を混ぜた文章です。ｶﾀｶﾅ（半角）もあります。",
    "모든 인간은 태어날 때부터 자유로우며 그 존엄과 권리에 있어 동등하다. 인간은 천부적으로 "
    "이성과 양심을 부여받았으며 서로 형제애의 정신으로 행동하여야 한다. 한국어 문장입니다.",
    "يولد جميع الناس أحرارًا متساوين في الكرامة والحقوق. وقد وهبوا عقلاً وضميرًا وعليهم أن يعامل "
    "بعضهم بعضًا بروح الإخاء. مرحبا بالعالم!",
    "כל בני אדם נולדו בני חורין ושווים בערכם ובזכויותיהם. כולם חוננו בתבונה ובמצפון.",
    "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त है। "
    "उन्हें बुद्धि और अन्तरात्मा की देन प्राप्त है और परस्पर उन्हें भाईचारे के भाव से बर्ताव करना चाहिए।",
    "มนุษย์ทั้งหลายเกิดมามีอิสระและเสมอภาคกันในเกียรติศักด์และสิทธิ ต่างมีเหตุผลและมโนธรรม",
    "Tất cả mọi người sinh ra đều được tự do và bình đẳng về nhân phẩm và quyền lợi. Mọi con người "
    "đều được tạo hóa ban cho lý trí và lương tâm.",
    "Kila mtu amezaliwa huru, hadhi na haki zake ni sawa. Wote wamejaliwa akili na dhamiri.",
    "Բոլոր մարդիկ ծնվում են ազատ ու հավասար իրենց արժանապատվությամբ ու իրավունքներով։ "
    "ყველა ადამიანი იბადება თავისუფალი და თანასწორი თავისი ღირსებითა და უფლებებით.",
    "ᐃᓄᒃᑎᑐᑦ ᑎᑎᕋᐅᓯᖅ · ᎠᏂᏴᏫ ᏂᎦᏓ · ꦧꦱꦗꦮ · ᠮᠣᠩᠭᠣᠯ · ཀྲུང་ཧྭ་ · ಕನ್ನಡ ಭಾಷೆ · தமிழ் மொழி · ພາສາລາວ",
    "ied 4 ½ months, Ⅻ roman, ٣٤٥ Arabic-Indic digits, ०१२ Devanagari digits, ①②③ circled, "
    "x² + y³ = z⁴, ¼ + ¾ = 1.",
]

EMOJI = ("😀 😃 😄 👍🏽 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ❤️ ✅ ☕ 🚀 (normal) 😶‍🌫️ 🧑🏿‍🚀 🫠 🥲 "
         "#️⃣ *️⃣ 1️⃣ 🔟 © ® ™ ✈︎ ✈️")

SPECIAL_TEXT = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nThe user greets.\n</think>\n\nHello!<|im_end|><|endoftext|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat's 2+2?<|eot_id|>",
    "<bos><start_of_turn>user\nTranslate <b>bold</b> and <code>x = 1</code>.<end_of_turn>\n"
    "<start_of_turn>model\n<table><tr><td>1</td></tr></table><end_of_turn><eos>",
    "Partial specials: <|im_sta <|im_end| <think </think <start_of_tur <|eot_id",
]


def stdlib_sources():
    import argparse, difflib, heapq, json.decoder, string, textwrap, fractions, shlex, calendar
    out = []
    for module in (textwrap, difflib, heapq, json.decoder, string, fractions, shlex, argparse, calendar):
        out.append(inspect.getsource(module))
    return out


def docstrings():
    import builtins, collections, itertools, functools, os.path, re
    parts = []
    for module in (builtins, collections, itertools, functools, os.path, re):
        for name in sorted(dir(module)):
            doc = getattr(getattr(module, name), "__doc__", None)
            if isinstance(doc, str) and len(doc) > 40:
                parts.append(name + ": " + doc)
    return ["\n\n".join(parts[i:i + 25]) for i in range(0, len(parts), 25)]


SCRIPTS = {  # code point ranges of letters (and marks) to build words from
    "latin": [(0x61, 0x7A), (0xE0, 0xFF), (0x100, 0x17F)],
    "cyrillic": [(0x430, 0x44F)],
    "greek": [(0x3B1, 0x3C9)],
    "han": [(0x4E00, 0x4FFF)],
    "hiragana": [(0x3041, 0x3096)],
    "hangul": [(0xAC00, 0xAFFF)],
    "arabic": [(0x627, 0x64A)],
    "devanagari": [(0x915, 0x939), (0x93E, 0x94D)],
    "thai": [(0xE01, 0xE30), (0xE31, 0xE3A)],
    "georgian": [(0x10D0, 0x10F0)],
}


def generated(rng):
    docs = []
    for _ in range(40):
        words = []
        for _ in range(rng.randint(40, 120)):
            script = rng.choice(sorted(SCRIPTS))
            lo, hi = rng.choice(SCRIPTS[script])
            word = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 9)))
            if rng.random() < 0.15:
                word = word.capitalize()
            words.append(word)
            roll = rng.random()
            if roll < 0.08:
                words.append(rng.choice([",", ".", "!", "?", ";", ":", "...", "—", "'s", "'LL", "\"", "(", ")"]))
            elif roll < 0.12:
                words.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            elif roll < 0.15:
                words.append(rng.choice(["\n", "\n\n", "\t", "  ", "   ", "\r\n", " \n ", "\u00a0", "\u3000"]))
        docs.append(" ".join(words))
    return docs


def stress(rng):
    docs = []
    ws = [" ", "  ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n ", "\u00a0", "\u2003", "\u3000", "\x0b", "\x0c"]
    for _ in range(30):
        parts = []
        for _ in range(rng.randint(50, 150)):
            kind = rng.random()
            if kind < 0.3:
                parts.append("".join(rng.choice(ws) for _ in range(rng.randint(1, 6))))
            elif kind < 0.5:
                parts.append(rng.choice(["3", "33", "333", "3333", "33333", "1,234,567", "3.14159", "-42", "0x1F", "1e-9", "２０２４", "٣٣"]))
            elif kind < 0.65:
                parts.append(rng.choice(EMOJI.split(" ")))
            elif kind < 0.8:
                parts.append("".join(rng.choice("!@#$%^&*()[]{}<>/\\|`~-_=+;:'\",.?") for _ in range(rng.randint(1, 8))))
            else:
                parts.append(rng.choice(["Hello", "world", "don't", "WE'RE", "y'all", "it's", "I'm", "o'clock", "naïve", "café"]))
        docs.append("".join(parts))
    # Decomposed (NFD) text, which NFC-normalizing tokenizers compose first.
    docs.append(unicodedata.normalize("NFD", " ".join(MULTILINGUAL[1:4] + MULTILINGUAL[13:14])))
    docs.append(unicodedata.normalize("NFD", "한국어 문장입니다. Ångström, e\u0301, a\u0308\u0304, \u1100\u1161\u11a8"))
    docs.append("a" * 300 + " " + "ab" * 200 + "\n" + "\U0001F600" * 50 + " " * 100 + "x")
    docs.append("")
    return docs


def corpus():
    rng = random.Random(20240611)
    docs = []
    for source in stdlib_sources():
        lines = source.splitlines(keepends=True)
        for i in range(0, len(lines), 120):  # documents of 120 lines
            docs.append("".join(lines[i:i + 120]))
    docs += docstrings()
    docs += MULTILINGUAL
    docs.append(EMOJI)
    docs += SPECIAL_TEXT
    docs += generated(rng)
    docs += stress(rng)
    return docs


def varint(n, out):
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def main():
    docs = corpus()
    OUT.mkdir(parents=True, exist_ok=True)
    data = bytearray()
    varint(len(docs), data)
    for d in docs:
        b = d.encode("utf-8")
        varint(len(b), data)
        data += b
    (OUT / "corpus.bin").write_bytes(bytes(data))
    print("corpus:", len(docs), "documents,", sum(len(d.encode()) for d in docs), "bytes")
    for name in TOKENIZERS:
        tok = Tokenizer.from_file(str(SHARED / name / "tokenizer.json"))
        data = bytearray()
        varint(len(docs), data)
        total = 0
        for d in docs:
            ids = tok.encode(d, add_special_tokens=False).ids
            total += len(ids)
            varint(len(ids), data)
            for i in ids:
                varint(i, data)
            decoded = tok.decode(ids, skip_special_tokens=False)
            if decoded == d:
                varint(0, data)
            else:
                b = decoded.encode("utf-8")
                varint(len(b) + 1, data)
                data += b
        (OUT / (name + ".ids")).write_bytes(bytes(data))
        print(name + ":", total, "ids,", len(data), "bytes")


if __name__ == "__main__":
    main()
