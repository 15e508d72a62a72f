"""vfm_plugins.spacing.evenly_spaced: the one rule by which contact sheets, preview sheets, clip-score and the
endpoint captioner pick frames."""

from __future__ import annotations

import numpy as np
import pytest

from vfm_plugins.spacing import evenly_spaced


def test_evenly_spaced_picks_what_numpy_linspace_rounded_picks_and_all_when_wanted_is_not_below_the_count():
    for count in range(1, 120):
        for wanted in range(1, count + 3):
            expected = np.linspace(0, count - 1, wanted).round().astype(int) if wanted < count else np.arange(count)
            assert evenly_spaced(count, wanted) == expected.tolist(), (count, wanted)
    assert evenly_spaced(5, None) == [0, 1, 2, 3, 4]


def test_evenly_spaced_never_picks_an_index_twice():
    assert all(len(set(evenly_spaced(count, wanted))) == min(count, wanted)
               for count in range(1, 200) for wanted in range(1, 40))


def test_evenly_spaced_refuses_fewer_than_one_wanted_naming_what_is_accepted():
    with pytest.raises(ValueError, match="wanted >= 1"):
        evenly_spaced(5, 0)
