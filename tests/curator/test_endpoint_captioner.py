"""The endpoint captioner against a real HTTP server in the test process that speaks the OpenAI
chat-completions protocol (what vLLM, SGLang and Ollama serve): the request it sends (model, prompt,
frames as JPEG data URLs of the clip's size, the key from the named environment variable), retries
on 5xx and timeouts, per-clip failures with their cause, the concurrency limit, and a `vfm curate`
run whose captions reach clips.parquet, the report and the shards with the model and prompt that
made them."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image
from typer.testing import CliRunner

import vfm_curator
from vfm_cli.main import app
from vfm_curator.captioners.endpoint import CaptionEndpointError, EndpointCaptioner
from tests.curator.local_http import ChatServer
from vfm_curator.synth import make_video

PROMPT = "Describe this clip."
COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]


@pytest.fixture
def serve():
    servers = []

    def start(behave):
        servers.append(ChatServer(behave))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def frames_of(colour, h=40, w=56, n=3):
    """``n`` flat frames of one colour, each a little brighter than the one before (their order shows)."""
    return [np.full((h, w, 3), np.clip(np.array(colour) + 10 * i, 0, 255), np.uint8) for i in range(n)]


def images(body):
    """The request's images, decoded: (PIL format, size, mean RGB) per image_url part."""
    out = []
    for part in body["messages"][-1]["content"]:
        if part["type"] == "image_url":
            url = part["image_url"]["url"]
            assert url.startswith("data:image/jpeg;base64,")
            img = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
            out.append((img.format, img.size, np.asarray(img.convert("RGB")).reshape(-1, 3).mean(0)))
    return out


def colour_index(body):
    """Which of COLOURS the request's first image shows."""
    mean = images(body)[0][2]
    return int(np.argmin([np.abs(mean - np.array(c)).sum() for c in COLOURS]))


def test_the_request_carries_model_prompt_key_and_the_frames_as_jpegs_of_the_clip_size(serve, monkeypatch):
    server = serve(lambda n, body: (200, "  a red field, brightening  ", 0.0))
    monkeypatch.setenv("TEST_CAPTION_KEY", "sk-test-123")
    cap = EndpointCaptioner(url=server.url, model="qwen-vl-test", prompt=PROMPT, api_key_env="TEST_CAPTION_KEY",
                            max_tokens=42)
    assert cap.caption(frames_of(COLOURS[0])) == "a red field, brightening"
    assert cap.provenance == {"model": "qwen-vl-test", "prompt": PROMPT}
    (body,), (headers,) = server.bodies, server.headers
    assert body["model"] == "qwen-vl-test" and body["max_tokens"] == 42 and body["stream"] is False
    (message,) = body["messages"]
    assert message["role"] == "user" and message["content"][0] == {"type": "text", "text": PROMPT}
    got = images(body)
    assert [(fmt, size) for fmt, size, _ in got] == [("JPEG", (56, 40))] * 3
    brightness = [mean.sum() for _, _, mean in got]
    assert brightness[0] < brightness[1] < brightness[2]  # the frames in order
    assert np.abs(got[0][2] - np.array(COLOURS[0])).max() < 6  # the clip's own pixels
    assert headers["Authorization"] == "Bearer sk-test-123"
    assert "sk-test-123" not in json.dumps(body)


def test_frames_option_sends_the_middle_frame_or_a_spread(serve):
    server = serve(lambda n, body: (200, "ok", 0.0))
    frames = frames_of(COLOURS[1], n=5)
    EndpointCaptioner(url=server.url, model="m", frames=1).caption(frames)
    EndpointCaptioner(url=server.url, model="m", frames=0).caption(frames)
    one, every = (images(b) for b in server.bodies)
    assert len(one) == 1 and abs(one[0][2].sum() - frames[2].reshape(-1, 3).mean(0).sum()) < 10
    assert len(every) == 5


def test_a_500_then_an_answer_is_retried_and_succeeds(serve):
    server = serve(lambda n, body: (500, "engine restarting", 0.0) if n == 0 else (200, "a caption", 0.0))
    cap = EndpointCaptioner(url=server.url + "/v1", model="m", retries=2, backoff_s=0.01)
    assert cap.caption(frames_of(COLOURS[0])) == "a caption"
    assert len(server.bodies) == 2 and server.bodies[0] == server.bodies[1]


def test_a_clip_the_server_always_fails_is_a_per_clip_failure_with_its_cause(serve):
    # clip 1 (green) always gets a 500; clips 0 and 2 are answered: one bad clip never takes the others down
    server = serve(lambda n, body: (500, "CUDA error", 0.0) if colour_index(body) == 1 else (200, f"colour {colour_index(body)}", 0.0))
    cap = EndpointCaptioner(url=server.url, model="m", retries=2, backoff_s=0.01)
    results = cap.caption_many([frames_of(c) for c in COLOURS])
    assert results[0] == "colour 0" and results[2] == "colour 2"
    err = results[1]
    assert isinstance(err, CaptionEndpointError)
    assert (err.cause, err.kind) == ("machine", "caption-endpoint")
    assert "after 3 attempts" in str(err) and "HTTP 500" in str(err) and "CUDA error" in str(err)
    assert sum(colour_index(b) == 1 for b in server.bodies) == 3  # 1 + 2 retries
    with pytest.raises(CaptionEndpointError, match="HTTP 500"):
        cap.caption(frames_of(COLOURS[1]))


def test_a_refused_request_is_not_retried_and_is_a_config_failure(serve):
    server = serve(lambda n, body: (404, "model 'nope' not found", 0.0))
    cap = EndpointCaptioner(url=server.url, model="nope", retries=3, backoff_s=0.01)
    (err,) = cap.caption_many([frames_of(COLOURS[0])])
    assert isinstance(err, CaptionEndpointError) and (err.cause, err.status) == ("config", 404)
    assert "model 'nope' not found" in str(err) and "check url and model" in str(err)
    assert len(server.bodies) == 1


def test_a_slow_answer_times_out_and_the_retry_gets_the_caption(serve):
    server = serve(lambda n, body: (200, "late" if n == 0 else "in time", 1.5 if n == 0 else 0.0))
    cap = EndpointCaptioner(url=server.url, model="m", timeout_s=0.3, retries=1, backoff_s=0.01)
    t0 = time.perf_counter()
    assert cap.caption(frames_of(COLOURS[0])) == "in time"
    assert time.perf_counter() - t0 < 1.2  # it did not wait for the slow answer
    assert len(server.bodies) == 2


def test_a_server_that_stays_slow_is_a_timeout_failure_after_the_retries(serve):
    server = serve(lambda n, body: (200, "late", 1.0))
    cap = EndpointCaptioner(url=server.url, model="m", timeout_s=0.2, retries=1, backoff_s=0.01)
    t0 = time.perf_counter()
    (err,) = cap.caption_many([frames_of(COLOURS[0])])
    assert time.perf_counter() - t0 < 0.9
    assert isinstance(err, CaptionEndpointError) and (err.cause, err.kind) == ("machine", "timeout")
    assert "timeout_s = 0.2" in str(err) and "after 2 attempts" in str(err)
    assert len(server.bodies) == 2


def test_no_server_listening_is_a_machine_failure_after_the_retries():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cap = EndpointCaptioner(url=f"http://127.0.0.1:{port}", model="m", retries=2, backoff_s=0.01)
    (err,) = cap.caption_many([frames_of(COLOURS[0])])
    assert isinstance(err, CaptionEndpointError) and err.cause == "machine"
    assert "ConnectionRefusedError" in str(err) and "after 3 attempts" in str(err)


def test_no_more_requests_are_in_flight_than_max_concurrency(serve):
    server = serve(lambda n, body: (200, f"clip {colour_index(body)}", 0.15))
    cap = EndpointCaptioner(url=server.url, model="m", max_concurrency=3)
    clips = [frames_of(COLOURS[i % 3]) for i in range(10)]
    t0 = time.perf_counter()
    results = cap.caption_many(iter(clips))  # an iterator: read lazily
    elapsed = time.perf_counter() - t0
    assert results == [f"clip {i % 3}" for i in range(10)]  # in the clips' order
    assert server.peak == 3  # the limit, and reached
    assert elapsed < 10 * 0.15 * 0.7  # requests overlapped
    cap.close()


@pytest.mark.parametrize(("options", "message"), [
    ({"url": "localhost:8000", "model": "m"}, "not an http"),
    ({"url": "http://h:1", "model": ""}, "model is required"),
    ({"url": "http://h:1", "model": "m", "api_key": "sk-secret"}, "api_key_env"),
    ({"url": "http://h:1", "model": "m", "api_key_env": "VFM_TEST_UNSET_KEY"}, "VFM_TEST_UNSET_KEY .* not set"),
    ({"url": "http://h:1", "model": "m", "max_concurrency": 0}, "max_concurrency = 0"),
    ({"url": "http://h:1", "model": "m", "timeout_s": 0}, "timeout_s = 0"),
    ({"url": "http://h:1", "model": "m", "request_options": {"model": "x"}}, "may not set model"),
])
def test_bad_options_are_errors_naming_the_option(options, message, monkeypatch):
    monkeypatch.delenv("VFM_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ValueError, match=message) as info:
        EndpointCaptioner(**options)
    assert "sk-secret" not in str(info.value)


# -- through the pipeline ---------------------------------------------------------------------

SHARD_TOML = '[shard]\nresolutions = [[32, 48]]\nframes = [9]\n[run]\nrunner = "serial"\n'


def test_vfm_curate_with_the_endpoint_captioner_records_model_and_prompt_in_table_report_and_shards(serve, tmp_path):
    server = serve(lambda n, body: (200, f"caption from {len(images(body))} frames of {images(body)[0][1]}", 0.0))
    make_video(tmp_path / "in" / "a.mp4", [14, 14], width=48, height=32, seed=3)
    config = tmp_path / "curate.toml"
    config.write_text('[run]\nrunner = "serial"\n[options.split]\nmin_clip_s = 0.4\n')
    out = tmp_path / "clips"
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(out), "--config", str(config), "--no-progress",
                                      "--captioner", "endpoint", "--caption-url", server.url, "--caption-model", "tiny-vl",
                                      "--caption-prompt", PROMPT])
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out / "clips.parquet").to_pylist()
    assert len(rows) == 2 and len(server.bodies) == 2
    for row in rows:
        assert row["caption"] == "caption from 3 frames of (48, 32)"  # first, middle, last frame at the clip's size
        assert dict(row["caption_by"]) == {"captioner": "endpoint", "model": "tiny-vl", "prompt": PROMPT}
    assert all(b["model"] == "tiny-vl" and b["messages"][0]["content"][0]["text"] == PROMPT for b in server.bodies)
    report = (out / "report.html").read_text()
    assert "by endpoint · tiny-vl" in report and f"prompt: {PROMPT}" in report and "2 of 2" in report
    assert "have none" not in result.output  # every clip has its caption: no advice

    (tmp_path / "s.toml").write_text(SHARD_TOML)
    shards = tmp_path / "shards"
    result = CliRunner().invoke(app, ["shard", str(out), "-o", str(shards), "--tokenizer", "pixel", "--text-encoder", "hash",
                                      "--config", str(tmp_path / "s.toml"), "--no-progress"])
    assert result.exit_code == 0, result.output
    metas = []
    for shard in sorted(shards.glob("*/shard-*.tar")):
        with tarfile.open(shard) as tar:
            metas += [json.loads(tar.extractfile(m).read()) for m in tar.getmembers() if m.name.endswith(".json")]
    assert len(metas) == 2
    for meta in metas:
        assert meta["caption"] == "caption from 3 frames of (48, 32)"
        assert meta["extra"]["caption_by"] == {"captioner": "endpoint", "model": "tiny-vl", "prompt": PROMPT}


def test_a_caption_server_that_keeps_failing_fails_the_video_with_its_cause_and_the_run_goes_on(serve, tmp_path, monkeypatch):
    server = serve(lambda n, body: (503, "overloaded", 0.0))
    monkeypatch.setenv("TEST_CAPTION_KEY", "sk-never-written-anywhere")
    make_video(tmp_path / "in" / "a.mp4", [14, 14], width=48, height=32, seed=3)
    (tmp_path / "in" / "b.mp4").write_bytes(b"")  # and a broken file: both are listed, neither stops the run
    config = {"run": {"runner": "serial", "max_attempts": 2}, "options": {
        "split": {"min_clip_s": 0.4},
        "caption": {"captioner": "endpoint", "captioner_options": {"url": server.url, "model": "m", "retries": 1, "backoff_s": 0.01,
                                                                   "api_key_env": "TEST_CAPTION_KEY"}}}}
    with pytest.raises(vfm_curator.NothingWrittenError, match="no clip written: all 2 videos failed") as caught:
        vfm_curator.curate(tmp_path / "in", tmp_path / "clips", config)  # every video failed: no clip
    summary = caught.value.summary
    assert summary.failures == 2 and summary.clips == 0
    lines = {json.loads(x)["source"].rsplit("/", 1)[-1]: json.loads(x) for x in (tmp_path / "clips" / "failures.jsonl").read_text().splitlines()}
    a = lines["a.mp4"]
    assert (a["stage"], a["cause"], a["kind"], a["attempts"]) == ("caption", "machine", "caption-endpoint", 2)
    assert "captioning failed for 2 of 2 clips" in a["reason"] and "HTTP 503" in a["reason"] and "overloaded" in a["reason"]
    assert len(server.bodies) == 2 * 2 * 2  # 2 clips x 2 attempts of the video (max_attempts) x 2 tries each (retries 1)
    assert lines["b.mp4"]["stage"] != "caption"
    report = (tmp_path / "clips" / "report.html").read_text()
    assert "caption-endpoint" in report and "--retry-failed caption-endpoint" in report
    assert all(h["Authorization"] == "Bearer sk-never-written-anywhere" for h in server.headers)
    written = [f for f in (tmp_path / "clips").rglob("*") if f.is_file()]
    assert written and not [f for f in written if b"sk-never-written-anywhere" in f.read_bytes()]


@pytest.mark.parametrize(("args", "message"), [
    (["--captioner", "endpoint", "--caption-url", "ftp://host", "--caption-model", "m"], "not an http"),
    (["--captioner", "endpoint", "--caption-url", "http://127.0.0.1:9"], "model is required"),
    (["--caption-url", "http://127.0.0.1:9"], "--caption-url needs --captioner"),
    (["--captioner", "nope"], "unknown captioner 'nope'; available: endpoint, vlm"),
    (["--captioner", "endpoint", "--caption-url", "http://127.0.0.1:9", "--caption-model", "m",
      "--caption-api-key-env", "VFM_TEST_UNSET_KEY"], "VFM_TEST_UNSET_KEY"),
])
def test_vfm_curate_refuses_bad_captioner_options_before_any_work(tmp_path, args, message, monkeypatch):
    monkeypatch.delenv("VFM_TEST_UNSET_KEY", raising=False)
    make_video(tmp_path / "in" / "a.mp4", [14], width=48, height=32, seed=3)
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--runner", "serial",
                                      "--no-progress", *args], env={"COLUMNS": "400"})
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "out").exists()  # nothing ran


def test_a_clip_whose_frames_cannot_be_sent_fails_alone(serve):
    server = serve(lambda n, body: (200, "fine", 0.0))
    cap = EndpointCaptioner(url=server.url, model="m")
    bad = [np.zeros((4, 4, 2), np.uint8)]  # two channels (grey + alpha): JPEG cannot hold it
    good, broken, empty = cap.caption_many([frames_of(COLOURS[0]), bad, []])
    assert good == "fine" and isinstance(broken, Exception) and not isinstance(broken, CaptionEndpointError)
    assert isinstance(empty, CaptionEndpointError) and empty.cause == "input"
    assert len(server.bodies) == 1
