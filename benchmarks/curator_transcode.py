"""Transcode speed: the transcode stage's milliseconds per frame on given videos (default: a
synthetic 1280x720 24 fps H264 video with three shots), one encoder thread, best of three.

To compare two versions, run it with each on the path, alternating, on an idle machine, e.g. an
older tree from ``git archive <rev> packages/vfm-curator/src | tar -x -C /tmp/old`` and
``PYTHONPATH=/tmp/old/packages/vfm-curator/src``.

    OMP_NUM_THREADS=1 python benchmarks/curator_transcode.py [VIDEO ...]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    import vfm_curator
    from vfm_curator.stages.decode import DecodeStage
    from vfm_curator.stages.split import SplitStage
    from vfm_curator.stages.transcode import TranscodeStage
    from vfm_curator.synth import make_video
    from vfm_curator.tasks import VideoTask

    videos = sys.argv[1:]
    if not videos:
        path = Path(tempfile.mkdtemp(prefix="vfm-transcode-bench-")) / "hd.mp4"
        make_video(path, [48, 60, 60], seed=0, width=1280, height=720, fps=24)
        videos = [str(path)]
    print(f"vfm_curator from {Path(vfm_curator.__file__).parent}; load average {os.getloadavg()[0]:.2f}")
    for source in videos:
        times, frames = [], 0
        for _ in range(3):
            task = VideoTask(source)
            DecodeStage().process([task])
            SplitStage(min_clip_s=0.25).process([task])
            if task.failure is not None:
                raise SystemExit(f"error: {source}: {task.failure}")
            frames = sum(c.end - c.start for c in task.clips)
            stage = TranscodeStage(encoder="libx264")
            stage.setup()
            start = time.perf_counter()
            stage.process([task])
            times.append(time.perf_counter() - start)
            assert task.failure is None, task.failure
        print(f"{Path(source).name}: {len(task.clips)} clips, {frames} frames; best of 3 {min(times):.3f} s = "
              f"{min(times) / frames * 1e3:.2f} ms per frame (all {', '.join(f'{t:.3f}' for t in times)} s)")


if __name__ == "__main__":
    main()
