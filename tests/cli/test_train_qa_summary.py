"""The closing summary of ``vfm train`` after a run with a step skipped as non-finite: the loss means
are over the finite losses and say how many steps were left out, instead of printing ``nan``."""

from __future__ import annotations

from vfm_cli.commands.train import _summary
from vfm_parallel.trainer import TrainResult


def test_the_loss_means_leave_a_skipped_nan_step_out_and_say_so(capsys):
    losses = {s: 1.0 for s in range(1, 21)}
    losses[20] = float("nan")  # the last step was skipped (its weights are the step before's)
    losses[19] = 0.5
    _summary(TrainResult(losses=losses, start_step=0, final_step=20))
    line = capsys.readouterr().out.splitlines()[0]
    assert line == ("loss 1.00000 (mean of steps 1-2) -> 0.50000 (mean of steps 19-20); 1 step(s) skipped as "
                    "non-finite, left out of the means")
