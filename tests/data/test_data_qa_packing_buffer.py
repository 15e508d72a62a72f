"""The default packing buffer holds enough samples that packs come out full."""

import torch

from tests.data.helpers import meta, quiet
from vfm_data import ShardWriter, make_loader, prepare_dataset


def _padding(loader, steps):
    real = total = 0
    for _ in range(steps):
        batch = next(loader)
        real += batch.num_tokens
        total += batch.patches.shape[0] * batch.patches.shape[1]
    return 1 - real / total


def test_default_packing_buffer_fills_packs_of_many_small_samples(tmp_path):
    g = torch.Generator().manual_seed(0)
    with ShardWriter(tmp_path, max_shard_bytes=200_000) as w:
        for i in range(40):  # (4, 3, 8, 8) at patch 2: 48 tokens, 21 to a pack of 1024
            w.write(f"s{i:03d}", torch.randn(4, 3, 8, 8, generator=g), torch.randn(2, 8, generator=g), meta())
    quiet(prepare_dataset, tmp_path)
    options = dict(patch_size=2, batch_size=1, max_seq_len=1024, streams=1, shuffle_buffer=None)
    loader = make_loader(tmp_path, **options)
    assert loader.spec.packing_buffer == 342  # 16 packs of 1024 tokens, 48 tokens a sample
    padding = _padding(loader, 17)
    # a buffer of 64 samples (the old default: 3 full packs and one of 1 sample a round) pads 25%
    assert _padding(make_loader(tmp_path, packing_buffer=64, **options), 16) > 0.2
    assert padding < 0.07  # 1.6% of each pack cannot hold a 48-token sample; the round's last pack


def test_packing_draws_no_progress_bar_between_the_trainers_lines(small_dataset, capfd):
    loader = make_loader(small_dataset, patch_size=2, batch_size=2, max_seq_len=16, streams=2, num_workers=1)
    for _ in range(2):
        next(loader)
    loader.close()
    assert "Filling reading buffer" not in capfd.readouterr().err  # energon's bar, one per stream and start
