"""What a library user imports from ``vfm_data`` itself."""

from __future__ import annotations


def test_vfm_data_exports_the_errors_its_readme_says_the_loader_raises():
    # the README says a ShardError stops the loader: a user's `except` needs it from the package itself
    import vfm_data
    from vfm_data.errors import DataError, ShardError

    assert (vfm_data.ShardError, vfm_data.DataError) == (ShardError, DataError)
    assert issubclass(vfm_data.ShardError, vfm_data.DataError)
