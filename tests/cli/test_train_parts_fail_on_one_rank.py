"""The trainer's parts failing on one rank only (a node's own copy of the shards or of ``model.init_from``)
end every rank of the job at once with a line naming that rank, in real gloo processes."""

from __future__ import annotations

import socket

from tests.cli.train_configs import tiny_shards_train
from tests.gloo import spawn


def _train_with_rank_1s_parts_failing(rank: int, world: int, root) -> str:
    from vfm_cli import recipe
    from vfm_parallel.preflight import PreflightError
    from vfm_parallel.trainer import config as config_mod
    from vfm_parallel.trainer import train

    sets = [f"data.blend={root / 'blend.yaml'}", f"train.out_dir={root / 'run'}", "parallel.tp=2", "parallel.dp_shard=1"]
    cfg = config_mod.load(root / "train.toml", sets, world)
    build = recipe.parts_builder(recipe.validate(cfg, world))

    def parts(ctx):
        if rank == 1:  # as loading a damaged copy of init_from on rank 1's node, before its loader is made
            raise ValueError("model.init_from: a damaged copy")
        return build(ctx)

    try:
        train(cfg, parts)
    except PreflightError as exc:
        return str(exc)
    return "trained"


def test_parts_failing_on_one_rank_of_a_subset_loading_group_end_every_rank_at_once(tmp_path):
    # tp=2: the ranks share their batches (data.subset_loading), over a group whose making is collective;
    # a rank whose parts failed before its loader was made must not leave the others waiting in it
    from vfm_data import write_blend

    from tests.cli.test_train_shards import IMAGE, _write_bucket

    _write_bucket(tmp_path, "i", IMAGE, 4, seed=2)
    write_blend(tmp_path / "blend.yaml", [(tmp_path / "i", 4)])
    (tmp_path / "train.toml").write_text(tiny_shards_train(", text_dim = 16"))
    expected = (f"rank 1 (host {socket.gethostname()}): model.init_from: a damaged copy (every rank of the job "
                "stopped for it before it began)")
    assert spawn(_train_with_rank_1s_parts_failing, 2, tmp_path, timeout=120) == [expected] * 2
