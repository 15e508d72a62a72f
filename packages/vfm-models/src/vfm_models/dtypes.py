"""The dtype names of the packages that depend on vfm-models: the ``dtype`` option of the tokenizers
and text encoders (a torch dtype or its name; export options are JSON), and vfm-infer's ``--dtype``
(``fp32``/``bf16``, looked up here). vfm-parallel (``param_dtype``/``reduce_dtype``, ``train.dtype``)
and vfm-curator's CLIP embedder do not depend on vfm-models and keep their own short tables."""

from __future__ import annotations

import torch

#: The dtypes a model may run in, by the names an export's options use.
FLOAT_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "float64": torch.float64}
#: The short names the curator and the inference pipeline also take.
ALIASES = {"fp32": "float32", "float": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
           "double": "float64"}


def float_dtype(value: torch.dtype | str | None, where: str) -> torch.dtype | None:
    """``value`` as a floating-point torch dtype (None stays None); anything else is an error naming
    ``where`` and the accepted names (``getattr(torch, value)`` made ``"bfloat17"`` an AttributeError
    and took ``"nn"``, a module, for a dtype)."""
    if value is None:
        return None
    if isinstance(value, torch.dtype) and value in FLOAT_DTYPES.values():
        return value
    name = value.removeprefix("torch.") if isinstance(value, str) else None
    name = ALIASES.get(name, name)
    if name in FLOAT_DTYPES:
        return FLOAT_DTYPES[name]
    raise ValueError(f"{where}: dtype must be a floating-point dtype, one of {', '.join([*FLOAT_DTYPES, *ALIASES])} "
                     f"or the torch dtype; got {value!r}")
