"""The vfm_data hook: a blender that draws from one dataset of the blend only."""

from vfm_data.plugins import hookimpl


class OneDataset:
    """Draws every sample from dataset ``index`` of the blend."""

    def __init__(self, index: int = 0) -> None:
        self.index = index

    def blend(self, dataset_weights, *, worker_config, progress_scale=1):
        return dataset_weights[self.index][0]

    def bucket(self, sample):
        return None


@hookimpl
def vfm_data_register_blenders(register):
    register("kinds-one", OneDataset, description="only one dataset of the blend")
