"""A second caption check: ask a VLM yes/no questions about a clip's caption and read P(yes).

Reuses :class:`vfm_curator.captioners.vlm.VLMCaptioner`'s loading (a local transformers folder,
``AutoProcessor`` + ``AutoModelForImageTextToText``); the answer is the first generated token's
probability of "yes" against "no", so no text is parsed.
"""

from __future__ import annotations

import numpy as np

from vfm_curator.captioners.vlm import VLMCaptioner

QUESTIONS = ("Question: does the caption \"{caption}\" describe this picture? Answer yes or no. Answer:",)


class VLMJudge(VLMCaptioner):
    """``VLMJudge(model_path, questions=QUESTIONS, yes="yes", no="no", device="cpu", dtype="auto")``; each
    question is a template whose ``{caption}`` is replaced by the caption."""

    def __init__(self, model_path: str, questions: list[str] | tuple[str, ...] = QUESTIONS, yes: str = "yes",
                 no: str = "no", device: str = "cpu", dtype: str = "auto") -> None:
        super().__init__(model_path, max_new_tokens=1, device=device, dtype=dtype)
        if isinstance(questions, str) or not questions or not all(isinstance(q, str) and "{caption}" in q for q in questions):
            raise ValueError(f"vlm judge: questions must be a list of templates holding '{{caption}}', got {questions!r}")
        self.questions = list(questions)
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.yes_id, self.no_id = (_first_token(tokenizer, word) for word in (yes, no))
        if self.yes_id == self.no_id:
            raise ValueError(f"vlm judge: {yes!r} and {no!r} are the same token ({self.yes_id}) for this tokenizer; "
                             "set yes/no to words its vocabulary holds")

    def agreement(self, frames: list[np.ndarray], caption: str) -> float:
        """Mean over the questions of P(yes) / (P(yes) + P(no)) on the clip's middle frame."""
        import torch

        image = frames[len(frames) // 2]
        probs = []
        for question in self.questions:
            inputs = self.processor(images=image, text=question.replace("{caption}", caption), return_tensors="pt").to(self.device)
            for key, value in inputs.items():  # pixels in the model's dtype (bf16 on CUDA); ids stay integers
                if torch.is_floating_point(value):
                    inputs[key] = value.to(self.dtype)
            with torch.inference_mode():
                out = self.model.generate(**inputs, max_new_tokens=1, do_sample=False, output_scores=True,
                                          return_dict_in_generate=True)
            logits = out.scores[0][0].float()  # (vocab,) of the first generated token
            pair = torch.stack([logits[self.yes_id], logits[self.no_id]]).softmax(0)
            probs.append(float(pair[0]))
        return float(np.mean(probs))


def _first_token(tokenizer, word: str) -> int:
    ids = tokenizer(word, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError(f"vlm judge: {word!r} gives no token")
    return int(ids[0])
