"""In-process streams take energon's state when it is asked for, not after every batch (saving and
encoding it was ~20% of the loading with a large packing buffer), and the position is still exact."""

import json

from vfm_data import make_loader

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8, streams=2)


def test_in_process_streams_save_their_state_only_when_asked_and_resume_exactly(small_dataset):
    reference = make_loader(small_dataset, **OPTIONS)
    expected = [next(reference).keys for _ in range(10)]
    loader = make_loader(small_dataset, **OPTIONS)
    got = [next(loader).keys for _ in range(2)]
    saves = []
    for stream in loader._streams.values():  # count energon's own state saves (the real ones run)
        save = stream.loader.save_state_rank
        stream.loader.save_state_rank = lambda save=save: saves.append(1) or save()
    got += [next(loader).keys for _ in range(4)]
    assert saves == []  # six batches, no state taken
    loader.close()  # the streams go: their position is kept first
    state = json.loads(json.dumps(loader.state_dict()))
    assert len(saves) == 2  # one per stream, at close()
    resumed = make_loader(small_dataset, **OPTIONS)
    resumed.load_state_dict(state)
    assert got + [next(resumed).keys for _ in range(4)] == expected
