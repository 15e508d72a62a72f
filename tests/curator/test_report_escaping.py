"""Text from outside (a caption server's answers and error pages, file names, paths in the clip table)
reaches ``report.html`` only as text and the terminal only without control characters: a real
``vfm curate`` run on a synthetic video named with ``<img onerror>`` and ESC, captioned by a real HTTP
server in the test process, and the report's links percent-encoded."""

from __future__ import annotations

from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_curator.io.report import ClipRow, ReportData, render
from tests.curator.local_http import LocalServer
from vfm_curator.synth import make_video

HOSTILE_NAME = "<img src=x onerror=\"document.body.dataset.pwned=1\">\x1b[31mred\x1b]8;;evil.example\x07.mp4"  # no "/"
HOSTILE_HTML = "</td></tr></table><script>document.body.dataset.pwned=2</script><img src=x onerror=alert(1)>"
CONTROLS = ("\x1b", "\x07", "\r", "\u202e")


class Server(LocalServer):
    """An OpenAI-style ``/v1/chat/completions`` answering every request with ``(status, body bytes)``:
    a JSON answer, or the plain-text error page a proxy in front of the model sends."""

    def __init__(self, status: int, body: bytes, content_type: str):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.serve(Handler)


@pytest.fixture
def serve():
    servers = []
    yield lambda *args: servers.append(Server(*args)) or servers[-1]
    for s in servers:
        s.close()


def curate(tmp_path: Path, url: str):
    make_video(tmp_path / "in" / HOSTILE_NAME, [14, 14], width=48, height=32, seed=3)
    (tmp_path / "curate.toml").write_text('[run]\nrunner = "serial"\nmax_attempts = 1\n[options.split]\nmin_clip_s = 0.4\n')
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(out), "--config", str(tmp_path / "curate.toml"),
                                      "--no-progress", "--captioner", "endpoint", "--caption-url", url,
                                      "--caption-model", "tiny-vl"])
    return result, out


class Texts(HTMLParser):
    """Every element's tag and every text node of a page."""

    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.texts = [], set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.update(name for name, _ in attrs)

    def handle_data(self, data):
        self.texts.append(data)


def test_a_caption_servers_error_page_reaches_the_terminal_without_controls_and_the_report_as_text(serve, tmp_path):
    page = f"<html>bad gateway {HOSTILE_HTML} \x1b]52;c;ZXZpbA==\x07\x1b[2J\r\u202etxt</html>".encode()
    result, out = curate(tmp_path, serve(400, page, "text/html").url)
    assert result.exit_code == 1
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: no clip written: the video failed (caption-endpoint 1)")
    assert not any(c in result.stderr for c in CONTROLS), repr(result.stderr)
    assert "\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\r\\u202etxt" in line  # what the server sent, readable
    report = (out / "report.html").read_text(encoding="utf-8")
    parsed = Texts()
    parsed.feed(report)
    assert parsed.tags.count("script") == 2 and "onerror" not in parsed.attrs  # only the page's own scripts
    assert any(HOSTILE_HTML in t for t in parsed.texts)  # the reason, as text
    assert any(HOSTILE_NAME in t for t in parsed.texts)  # the file name, as text


def test_an_endpoint_caption_holding_html_is_text_in_the_report(serve, tmp_path):
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": HOSTILE_HTML}, "finish_reason": "stop"}]}
    result, out = curate(tmp_path, serve(200, json.dumps(answer).encode(), "application/json").url)
    assert result.exit_code == 0, result.output
    report = (out / "report.html").read_text(encoding="utf-8")
    parsed = Texts()
    parsed.feed(report)
    assert parsed.tags.count("script") == 2 and "onerror" not in parsed.attrs
    assert sum(t == HOSTILE_HTML for t in parsed.texts) == 2  # both clips' captions, each as it was written


def test_report_links_are_percent_encoded_so_a_name_cannot_become_a_script_url(tmp_path):
    """A clip table merged from elsewhere may name any file inside the folder: the link still points at it."""
    for name in ("javascript:alert(1)", "clips/a b#c?d.mp4", 'thumbs/x".jpg'):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    rows = [ClipRow(id="x", source="s.mp4", start_s=0, end_s=1, start_frame=0, end_frame=1, width=8, height=8,
                    caption=None, scores={}, path=p) for p in ("javascript:alert(1)", "clips/a b#c?d.mp4")]
    rows[1].thumb = 'thumbs/x".jpg'
    page = render(ReportData(clips=rows), None, title="t")
    assert 'href="javascript%3Aalert%281%29"' in page
    assert 'href="clips/a%20b%23c%3Fd.mp4"' in page and 'src="thumbs/x%22.jpg"' in page
    assert "javascript:alert" not in page
    # an ordinary link is written as before
    rows = [ClipRow(id="0a1b", source="s.mp4", start_s=0, end_s=1, start_frame=0, end_frame=1, width=8, height=8,
                    caption=None, scores={}, path="clips/0a1b.mp4")]
    assert '<a href="clips/0a1b.mp4">0a1b</a>' in render(ReportData(clips=rows), None, title="t")
