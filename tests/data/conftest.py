import warnings

import pytest

from tests.data.helpers import write_dataset


@pytest.fixture(autouse=True)
def _no_pin_memory_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
        yield


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("small"), 60)
