"""MP4 (H264) and PNG contact-sheet output, read back with PyAV."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.planted_links import plant_link
from vfm_infer.video.contact_sheet import contact_sheet, read_png, write_png
from vfm_infer.video.frames import to_uint8_frames
from vfm_infer.video.mp4 import read_mp4, write_mp4


def moving_square(t: int = 9, h: int = 32, w: int = 48) -> np.ndarray:
    frames = np.zeros((t, h, w, 3), dtype=np.uint8)
    for i in range(t):
        frames[i, 8:20, 2 + 4 * i : 14 + 4 * i] = (230, 40, 90)
    return frames


def test_to_uint8_frames_maps_minus_one_to_zero_and_one_to_255():
    video = torch.stack([torch.full((2, 2, 2), v) for v in (-1.0, 0.0, 1.0)])  # (C=3, T, H, W)
    frames = to_uint8_frames(video)
    assert frames.shape == (2, 2, 2, 3) and frames.dtype == np.uint8
    assert frames[0, 0, 0].tolist() == [0, 128, 255]


def test_to_uint8_frames_rejects_other_channel_counts():
    with pytest.raises(ValueError, match="1- or 3-channel"):
        to_uint8_frames(torch.zeros(4, 1, 2, 2))


def test_mp4_reads_back_with_the_frame_count_size_and_content(tmp_path):
    frames = moving_square()
    path = write_mp4(tmp_path / "a.mp4", frames, fps=12)
    back = read_mp4(path)
    assert back.shape == frames.shape
    # Lossy H264 at crf 18: close to the input, not equal.
    assert np.abs(back.astype(int) - frames.astype(int)).mean() < 6
    import av

    with av.open(str(path)) as c:
        assert c.streams.video[0].codec_context.name == "h264"
        assert c.streams.video[0].average_rate == 12


def test_read_mp4_with_max_frames_decodes_the_first_frames_only(tmp_path):
    path = write_mp4(tmp_path / "a.mp4", moving_square(t=9), fps=12)
    first = read_mp4(path, max_frames=3)
    assert first.shape == (3, 32, 48, 3) and np.array_equal(first, read_mp4(path)[:3])
    assert read_mp4(path, max_frames=20).shape[0] == 9  # a limit past the end: every frame


def test_read_mp4_refuses_max_frames_below_one_naming_what_is_accepted(tmp_path):
    path = write_mp4(tmp_path / "a.mp4", moving_square(t=3), fps=12)
    for wrong in (0, -2):  # 0 decoded every frame: no frame count ever equalled it
        with pytest.raises(ValueError, match=rf"max_frames must be None \(every frame\) or >= 1; got {wrong}"):
            read_mp4(path, max_frames=wrong)


def test_row_per_video_shows_each_video_as_one_row_of_evenly_spaced_frames_enlarged():
    from vfm_infer.video.contact_sheet import row_per_video

    long, short = moving_square(t=9, h=8, w=8), moving_square(t=2, h=8, w=8)[:, :, ::-1].copy()
    sheet = row_per_video([long, short], max_frames=3, min_height=16, gap=2)
    assert sheet.shape == (16 + 2 + 16, 3 * 16 + 2 * 2, 3)  # 8 px frames doubled to 16; the longer row sets the width
    assert np.array_equal(sheet[:16, 18:34], long[4].repeat(2, axis=0).repeat(2, axis=1))  # frames 0, 4, 8 of 9
    assert np.array_equal(sheet[18:, 18:34], short[1].repeat(2, axis=0).repeat(2, axis=1))
    assert (sheet[18:, 36:] == 255).all()  # white right of the shorter row


def test_mp4_rejects_odd_sizes_before_writing(tmp_path):
    with pytest.raises(ValueError, match="even height and width; got 31x48"):
        write_mp4(tmp_path / "odd.mp4", moving_square(h=31))
    assert not (tmp_path / "odd.mp4").exists()


def test_contact_sheet_png_round_trips_exactly_and_holds_the_chosen_frames(tmp_path):
    frames = moving_square(t=9)
    sheet = contact_sheet(frames, max_frames=4, columns=2, gap=2)
    assert sheet.shape == (2 * 32 + 2, 2 * 48 + 2, 3)
    # Frames 0, 3, 5, 8 of 9 (evenly spaced), row-major.
    assert np.array_equal(sheet[:32, :48], frames[0]) and np.array_equal(sheet[34:, 50:], frames[8])
    back = read_png(write_png(tmp_path / "sheet.png", sheet))
    assert np.array_equal(back, sheet)


def test_mp4_is_not_written_through_a_link_planted_at_the_old_partial_name(tmp_path):
    out = tmp_path / "out"
    victim = plant_link(out / ".0000.partial.mp4", tmp_path / "home")  # the name write_mp4 used to write to
    frames = moving_square()
    write_mp4(out / "0000.mp4", frames, fps=12)
    assert victim.read_text() == "precious"
    assert not (out / "0000.mp4").is_symlink() and read_mp4(out / "0000.mp4").shape == frames.shape


def test_png_is_not_written_through_a_link_planted_at_the_old_partial_name(tmp_path):
    out = tmp_path / "out"
    victim = plant_link(out / ".0000.partial.png", tmp_path / "home")
    sheet = contact_sheet(moving_square())
    write_png(out / "0000.png", sheet)
    assert victim.read_text() == "precious"
    assert np.array_equal(read_png(out / "0000.png"), sheet)


def test_a_partial_file_is_named_by_the_rule_that_finds_leftovers_and_keeps_the_suffix(tmp_path):
    from vfm_infer.video.mp4 import partial_file, partial_final_name

    with partial_file(tmp_path / "0003.mp4") as first, partial_file(tmp_path / "0003.mp4") as second:
        assert first != second  # unpredictable, never shared
        assert first.suffix == ".mp4" and first.name.startswith(".0003.partial.")
        assert partial_final_name(first.name) == "0003.mp4"
    assert partial_final_name(".0003.partial.mp4") == "0003.mp4"  # what earlier versions left
    assert partial_final_name("0003.mp4") is None and partial_final_name(".notes.txt") is None


def test_write_mp4_gives_the_same_bytes_for_the_same_video_whatever_the_heap_held(tmp_path):
    # generated videos are reproducible to the byte (libx264's AVX-512 code read unwritten memory)
    from tests.curator.test_encode_determinism import _dirty_heap
    from vfm_infer.video.mp4 import write_mp4

    video = np.random.default_rng(0).integers(0, 256, size=(12, 48, 64, 3), dtype=np.uint8)
    written = set()
    for i, byte in enumerate((0x00, 0xFF, 0x5A, 0xA5, 0x33, 0xCC)):
        _dirty_heap(byte)
        written.add(write_mp4(tmp_path / f"{i}.mp4", video, fps=8).read_bytes())
    assert len(written) == 1


def test_mp4_takes_uint8_frames_as_a_torch_tensor_too(tmp_path):
    # refused as "expected uint8 frames (T, H, W, 3), got torch.uint8 torch.Size([3, 16, 16, 3])"
    frames = torch.randint(0, 256, (3, 16, 16, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    write_mp4(tmp_path / "t.mp4", frames, fps=8)
    write_mp4(tmp_path / "n.mp4", frames.numpy(), fps=8)
    assert (tmp_path / "t.mp4").read_bytes() == (tmp_path / "n.mp4").read_bytes()
    with pytest.raises(ValueError, match=r"got float32 \(3, 16, 16, 3\) \(a video \(C, T, H, W\) in \[-1, 1\]: "
                                         r"to_uint8_frames\(video\)\)"):
        write_mp4(tmp_path / "f.mp4", frames.float().numpy() / 255, fps=8)


def test_mp4_refuses_a_bfloat16_tensor_naming_to_uint8_frames_like_any_float_frames(tmp_path):
    # a bf16 decoder's output handed over as it is: numpy has no bfloat16, so it was torch's
    # "TypeError: Got unsupported ScalarType BFloat16" instead of the error that says what to pass
    frames = torch.zeros(3, 16, 16, 3, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"got bfloat16 \(3, 16, 16, 3\) \(a video \(C, T, H, W\) in \[-1, 1\]: "
                                         r"to_uint8_frames\(video\)\)"):
        write_mp4(tmp_path / "b.mp4", frames, fps=8)
    assert not list(tmp_path.iterdir())
