"""Writes tests/fixtures/text/: a caption corpus and the token ids the reference tokenizers give it.

privdiff's tokenizers (sdk/src/text/) are checked against these ids by tests/sdk/text/tokenizers_test.cpp:
  * BERT WordPiece against HF's BertTokenizerFast (lower case), what CompVis's BERTTokenizer calls
    (ldm/modules/encoders/modules.py), on a small vocabulary made here (bert_vocab.txt);
  * CLIP's byte-level BPE against HF's CLIPTokenizerFast (Stable Diffusion's pipelines), HF's CLIPTokenizer
    with ftfy and open_clip's SimpleTokenizer, on the first MERGES merges of the real vocabulary
    (bpe_simple_vocab_16e6.txt.gz from the open-clip-torch wheel) written as clip_merges.txt.
For each line the fixture also says whether the three CLIP references agree: they differ where ftfy or
html.unescape change the text, or where Python's str.lower (final sigma) differs from Rust's per-character one.

Usage: tokenizer_reference.py OUT_DIR OPEN_CLIP_DIR   (OPEN_CLIP_DIR: the wheel's unpacked open_clip/ folder)
"""
import gzip
import importlib.util
import json
import os
import sys
import tempfile
import types

from transformers import BertTokenizerFast, CLIPTokenizer, CLIPTokenizerFast

CONTEXT = 77
MERGES = 3000  # a vocabulary of 512 + 3000 + 2 tokens: short words merge, long ones fall back to pieces

LONG = " ".join(["a smiling young woman with long wavy blond hair and heavy makeup"] * 12)
CORPUS = [
    "",
    "   ",
    "a photo of a woman with blond hair",
    "This woman has wavy hair, arched eyebrows, and a slightly open mouth.",
    "The man has a beard, bushy eyebrows and big nose. He is wearing a necktie!",
    "Café déjà vu — naïve façade, Ångström, Øre, straße, Crème Brûlée",
    "e\u0301 decomposed beside \u00e9 composed; A\u030a beside \u00c5",
    "İstanbul DİYARBAKIR ıi Iı",
    "ΟΔΟΣ Σοφία ΣΑΣ ς σ",
    "Hello!!! What's up? (yes) [no] {maybe} #hashtag @user $100 50% a&b ~tilde~ back\\slash",
    "don't can't I'm we'll they've she'd it's IT'S DON'T We'Re",
    "''s 's' !'s x'sy '''",
    "a cat \U0001F431 with \U0001F44D\U0001F3FD and \U0001F468\u200d\U0001F469\u200d\U0001F467 family \U0001F970 \U0001FAE0 \u2764\ufe0f",
    "3.14159 1,000,000 2nd 4k 1080p abc123def \u0663\u0664 \u00bd \u216b \u2460 \u00b2",
    "中文字符 日本語のテキスト 한국어 \u3042\u3044\u3046 a\U0002b820b a\U0002b920b a\U00020000b",
    "  tabs\tand\nnewlines\r\n and\u00a0nbsp\u2003em\u3000ideographic\u2028line\u2029para  ",
    "null\u0000char bell\u0007 vt\u000b ff\u000c nel\u0085 zero\u200bwidth soft\u00adhyphen bom\ufeff repl\ufffd",
    "private\ue000use \u0890 \U00013430 \u2e4f \u2e50 \U0001e944",
    "\ufb01 ligature \ufb02ow \uff26\uff35\uff2c\uff2c\uff37\uff29\uff24\uff34\uff28 \uff11\uff12",
    "fish &amp; chips &lt;3 &#39;quoted&#39; &amp;amp;",
    "\u201csmart\u201d \u2018quotes\u2019 it\u2019s \u2014 dash \u2013 en \u2026",
    "नमस्ते दुनिया مرحبا بالعالم שלום עולם привет мир",
    "<|startoftext|> hi <|endoftext|> <|ENDOFTEXT|> <start_of_text> <end_of_text>",
    "[CLS] [SEP] [MASK] [UNK] [PAD] [cls] [unused0]",
    "a" * 150,
    "unbelievably counterproductive antidisestablishmentarianism photographers",
    LONG,
    "\u00e9" * 30 + " " + "x" * 99 + " " + "y" * 100 + " " + "z" * 101,
    "mojibake: cafÃ© Ã©tÃ©",
    "legacy classes: a\u08e3b x\u2e42y x\u2e43y a\u0378b a\u061cb \u1ab0 x\u1ab0y",
    "tab\u0009separated\u001fvalues\u001cand\u001dgroup\u001erecord",
]

BERT_SPECIAL = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def bert_vocabulary(directory):
    """A vocabulary over the corpus's own characters: some characters and words are left out so that
    [UNK] and ## pieces both occur; ids differ from bert-base-uncased's so that nothing is assumed."""
    seed = os.path.join(directory, "seed_vocab.txt")
    with open(seed, "w", encoding="utf-8") as f:
        f.write("\n".join(BERT_SPECIAL + ["a"]) + "\n")
    probe = BertTokenizerFast(vocab_file=seed, do_lower_case=True)
    backend = probe.backend_tokenizer
    words = []
    for line in CORPUS:
        for word, _ in backend.pre_tokenizer.pre_tokenize_str(backend.normalizer.normalize_str(line)):
            words.append(word)
    chars = sorted({c for w in words for c in w})
    left_out = {"q", "\u0905", "\U0001F431"}  # a letter, a Devanagari letter, an emoji: [UNK] words
    pieces = [c for c in chars if c not in left_out]
    continued = ["##" + c for c in chars if c not in left_out and c != "z"]  # z only word-initially
    whole = sorted({w for w in words if len(w) > 2})[::2]  # every other word of the corpus, as a whole
    extra = ["photo", "##graph", "##ers", "un", "##believ", "##ably", "counter", "##product", "##ive"]
    vocab = BERT_SPECIAL + pieces + continued + [w for w in whole + extra if w not in pieces]
    seen, unique = set(), []
    for token in vocab:
        if token not in seen:
            seen.add(token)
            unique.append(token)
    return unique


def bert_ids(vocab_path):
    tokenizer = BertTokenizerFast(vocab_file=vocab_path, do_lower_case=True)
    encoded = tokenizer(CORPUS, truncation=True, max_length=CONTEXT, padding="max_length")
    return tokenizer, [
        {"ids": ids, "length": sum(mask)} for ids, mask in zip(encoded["input_ids"], encoded["attention_mask"])
    ]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
    bs += list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]  # in open_clip's order: the printable bytes first, then the rest


def load_open_clip(open_clip_dir):
    """open_clip's tokenizer.py imports torch only for its tensor output: without torch installed, a
    stand-in module lets it load (with the pinned torch, the real one is used)."""
    stand_in = types.ModuleType("torch")
    stand_in.__getattr__ = lambda name: object  # only annotations (torch.LongTensor) are read at import
    sys.modules.setdefault("torch", stand_in)
    spec = importlib.util.spec_from_file_location("open_clip_tokenizer", os.path.join(open_clip_dir, "tokenizer.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def open_clip_ids(tokenizer, text):
    """SimpleTokenizer.__call__ without torch: sot + encode + eot, cut to CONTEXT with eot kept last."""
    tokens = [tokenizer.sot_token_id] + tokenizer.encode(text) + [tokenizer.eot_token_id]
    if len(tokens) > CONTEXT:
        tokens = tokens[:CONTEXT]
        tokens[-1] = tokenizer.eot_token_id
    return tokens


def clip_references(directory, open_clip_dir):
    with gzip.open(os.path.join(open_clip_dir, "bpe_simple_vocab_16e6.txt.gz")) as f:
        lines = f.read().decode("utf-8").split("\n")
    header, merges = lines[0], lines[1 : 1 + MERGES]
    merges_text = "\n".join([header] + merges)  # no newline after the last merge (see the note in the test)
    merges_path = os.path.join(directory, "clip_merges.txt")
    with open(merges_path, "w", encoding="utf-8") as f:
        f.write(merges_text)
    units = bytes_to_unicode()
    vocab = units + [u + "</w>" for u in units] + ["".join(m.split()) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    vocab_path = os.path.join(directory, "vocab.json")
    with open(vocab_path, "w", encoding="utf-8") as f:
        json.dump({token: i for i, token in enumerate(vocab)}, f, ensure_ascii=False)
    gz_path = os.path.join(directory, "merges.txt.gz")
    with gzip.open(gz_path, "wb") as f:
        f.write(merges_text.encode("utf-8"))

    fast = CLIPTokenizerFast(vocab_file=vocab_path, merges_file=merges_path)
    slow = CLIPTokenizer(vocab_file=vocab_path, merges_file=merges_path)
    reference = load_open_clip(open_clip_dir).SimpleTokenizer(bpe_path=gz_path)
    assert len(reference.encoder) == len(vocab), "open_clip's vocabulary differs in size"
    rows = []
    for line in CORPUS:
        f_enc = fast(line, truncation=True, max_length=CONTEXT)["input_ids"]
        s_enc = slow(line, truncation=True, max_length=CONTEXT)["input_ids"]
        o_enc = open_clip_ids(reference, line)
        rows.append({"ids": f_enc, "slow_agrees": s_enc == f_enc, "open_clip_agrees": o_enc == f_enc,
                     "open_clip_ids": o_enc})
    return merges_text, rows, fast.pad_token_id


def main():
    out, open_clip_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        vocab = bert_vocabulary(scratch)
        bert_path = os.path.join(out, "bert_vocab.txt")
        with open(bert_path, "w", encoding="utf-8") as f:
            f.write("\n".join(vocab) + "\n")
        _, bert_rows = bert_ids(bert_path)
        merges_text, clip_rows, clip_pad = clip_references(scratch, open_clip_dir)
    with open(os.path.join(out, "clip_merges.txt"), "w", encoding="utf-8") as f:
        f.write(merges_text)
    with gzip.GzipFile(os.path.join(out, "clip_merges.txt.gz"), "wb", mtime=0) as f:  # as open_clip ships it
        f.write(merges_text.encode("utf-8"))
    fixture = {
        "generated_by": "scripts/make_text_fixtures.sh (scripts/text_fixtures/requirements.txt pins)",
        "context_length": CONTEXT,
        "corpus": CORPUS,
        "bert": {"vocab": "bert_vocab.txt", "pad_id": 0, "rows": bert_rows},
        "clip": {"merges": "clip_merges.txt", "merges_used": MERGES, "pad_id": clip_pad, "rows": clip_rows},
    }
    with open(os.path.join(out, "tokenizers.json"), "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=True, indent=1)
        f.write("\n")
    disagreeing = [i for i, r in enumerate(clip_rows) if not r["open_clip_agrees"]]
    print(f"{len(CORPUS)} lines; BERT vocabulary {len(vocab)} tokens; CLIP references disagree on lines {disagreeing}")


if __name__ == "__main__":
    main()
