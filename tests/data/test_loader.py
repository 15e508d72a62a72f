import json

import pytest

from vfm_data import make_loader

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8, streams=4)


def _keys(loader, n):
    return [tuple(next(loader).keys) for _ in range(n)]


@pytest.mark.parametrize("workers_before,workers_after", [(0, 0), (0, 2), (2, 1)])
def test_resume_continues_the_exact_sample_sequence(small_dataset, workers_before, workers_after):
    n = 5
    reference = make_loader(small_dataset, num_workers=0, **OPTIONS)
    recorded = _keys(reference, 2 * n)
    first = make_loader(small_dataset, num_workers=workers_before, **OPTIONS)
    assert _keys(first, n) == recorded[:n]
    state = json.loads(json.dumps(first.state_dict()))  # checkpoints hold it as JSON
    first.close()
    resumed = make_loader(small_dataset, num_workers=workers_after, **OPTIONS)
    resumed.load_state_dict(state)
    assert _keys(resumed, n) == recorded[n:]
    resumed.close()


def test_loader_state_from_another_layout_is_refused_naming_the_difference(small_dataset):
    state = make_loader(small_dataset, **OPTIONS).state_dict()
    other = make_loader(small_dataset, **{**OPTIONS, "streams": 2})
    with pytest.raises(ValueError, match="streams=4.*streams=2"):
        other.load_state_dict(state)
