from vfm_infer import hookimpl
from vfm_infer.samplers import Sampler
from vfm_infer.samplers.flow import shifted_levels


class FlowMidpoint(Sampler):
    """The explicit midpoint rule on the rectified-flow ODE dx/ds = v(x, s) (2N evaluations)."""

    formulation = "rectified-flow"  # the denoiser returns the velocity v(x, s)
    order = 2

    def __init__(self, steps: int = 32, *, shift: float = 1.0) -> None:
        super().__init__(steps)
        self.shift = shift  # filled in from the export's formulation options

    def levels(self):
        return shifted_levels(self.steps, self.shift)

    def num_evaluations(self) -> int:
        return 2 * self.steps

    def _run(self, evaluate, x, levels, generator, callback):
        for i, (s, s_next) in enumerate(zip(levels[:-1], levels[1:])):
            h = s_next - s
            x_mid = x + 0.5 * h * evaluate(x, s)
            x = x + h * evaluate(x_mid, s + 0.5 * h)
            callback(i + 1, self.steps)
        return x


@hookimpl
def vfm_infer_register_samplers(register):
    register("flow-midpoint", FlowMidpoint, description="midpoint rule on the flow ODE, 2nd order")
