"""Deinterlacing decoded frames as they are read (FFmpeg's ``bwdif``), so interlaced sources give
progressive clips with the decoder's frame count."""

from __future__ import annotations


class _Deinterlace:
    """FFmpeg's ``bwdif`` over a stream from its first interlaced frame on (camcorder DV/HDV/AVCHD,
    broadcast .ts, DVD .vob): one progressive frame for each frame in, same times and tags, so a
    clip shows no combing and the frame count is the decoder's. Progressive frames before the first
    interlaced one pass as they are; after it, ``deint=interlaced`` leaves progressive frames alone.
    A frame of another size or format starts a new filter (the old one is flushed first)."""

    def __init__(self, time_base) -> None:
        self.time_base, self.graph, self.shape = time_base, None, None

    def push(self, frame):
        """The frames ready after ``frame`` (None: the end, every frame held)."""
        import av

        if frame is not None and self.graph is None and not frame.interlaced_frame:
            yield frame
            return
        shape = None if frame is None else (frame.width, frame.height, frame.format.name)
        if self.graph is not None and shape != self.shape:  # the end, or a new size: flush this filter
            self.graph.push(None)
            yield from self._pull(av)
            self.graph = None
        if frame is None:
            return
        if self.graph is None:
            self.graph, self.shape = self._build(frame), shape
        self.graph.push(frame)
        yield from self._pull(av)

    def _build(self, frame):
        import av

        graph = av.filter.Graph()
        source = graph.add_buffer(width=frame.width, height=frame.height, format=frame.format,
                                  time_base=frame.time_base or self.time_base)
        bwdif = graph.add("bwdif", "mode=send_frame:parity=auto:deint=interlaced")
        sink = graph.add("buffersink")
        source.link_to(bwdif)
        bwdif.link_to(sink)
        graph.configure()
        return graph

    def _pull(self, av):
        while True:
            try:
                yield self.graph.pull()
            except (av.BlockingIOError, av.EOFError):
                return
