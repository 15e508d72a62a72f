from vfm_curator import hookimpl
from vfm_curator.stages.base import Resources, Stage


class KeepLongest(Stage):
    """Keeps the `keep` longest clips of each video (after `split`, before `transcode`)."""

    name = "keep-longest"
    resources = Resources(cpus=0.25, memory_mb=128)
    defaults = {"keep": 2}

    def check_options(self):  # runs in the driver before any work
        self.option_range("keep", lo=1, integer=True)

    def process_one(self, task):
        task.clips = sorted(task.clips, key=lambda clip: clip.end - clip.start, reverse=True)[: self.opt["keep"]]


@hookimpl
def vfm_curator_register_stages(register):
    register("keep-longest", KeepLongest, description="keep the N longest clips of each video")
