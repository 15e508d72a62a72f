"""The vfm_parallel hook: a strategy that records where it was applied (no mesh dimension)."""

from vfm_parallel.plugins import hookimpl


class Tag:
    """Sets ``model.kinds_tag`` to its ``tag`` option; acts in the compile phase, over no mesh dimension."""

    name = "kinds-tag"
    phase = "compile"
    mesh_dims = ()

    def apply(self, model, mesh, plan, *, tag="tagged"):
        model.kinds_tag = (tag, plan.num_layers)
        return model


@hookimpl
def vfm_parallel_register_strategies(register):
    register("kinds-tag", Tag, description="tags the model (no parallelism)")
