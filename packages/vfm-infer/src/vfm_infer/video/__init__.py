"""Video output: pixels to uint8 frames, MP4 (H264) files through PyAV, PNG contact sheets."""
