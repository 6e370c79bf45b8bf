"""Fatal problems end with one line ``speculators_qwen_compat: error: ...`` and exit 1; bad rows
are skipped and counted instead.

The single-run cases go through one interpreter (conftest.run_batch: ``prepare_data``'s ``main``
once per case, with the case's own stdout, stderr and environment), so the suite pays the
start-up and imports once, not thirteen times; each test checks its own cases."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    RENDERS,
    good_rows,
    last_line,
    prepare_args,
    read_report,
    rejected_rows,
    run_batch,
    run_prepare,
    run_program,
    write_dataset,
)

from speculators_qwen_compat.cli.worker_sockets import MANAGER_SUFFIX, SOCKET_PATH_LIMIT
from speculators_qwen_compat.data.read.unreadable import INVALID_UNICODE

PREFIX = "speculators_qwen_compat: error: "


def _args(model: Path | str, data: Path | str, output: Path, *extra: str) -> list[str]:
    """prepare_data's arguments as ``_prepare`` passes them (one map worker)."""
    return prepare_args(model, output, data, extra=extra, workers=1)


@pytest.fixture(scope="module")
def cases(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every single-run case in one interpreter (run_batch): the paths and, by name, results."""
    work = tmp_path_factory.mktemp("fatal")
    paths: dict[str, Path] = {}
    runs: dict[str, list[str]] = {}

    def case(name: str, *args: str) -> None:
        runs[name] = list(args)

    data = write_dataset(work / "d.jsonl", good_rows(2))
    paths["no_model"] = work / "no-such-model"
    case("missing_model", *_args(paths["no_model"], data, work / "out-model"))
    case("missing_model_debug", *_args(paths["no_model"], data, work / "out-model", "--debug"))
    paths["nope"] = work / "nope.jsonl"
    case("missing_data", *_args(qwen36_dir, paths["nope"], work / "out-data"))
    flat = work / "flat.jsonl"
    flat.write_text('{"prompt": "hi", "completion": "yo"}\n')
    case("no_column_flat", *_args(qwen36_dir, flat, work / "out-flat"))
    other = work / "other.jsonl"
    other.write_text('{"id": 1, "text": "hi"}\n')
    case("no_column_other", *_args(qwen36_dir, other, work / "out-other"))
    rejected = write_dataset(work / "rejected.jsonl", [row for _, row in rejected_rows()])
    case("all_rejected", *_args(qwen36_dir, rejected, work / "out-rejected"))
    paths["malformed"] = malformed = write_dataset(work / "malformed.jsonl", good_rows(6))
    with malformed.open("a", encoding="utf-8") as fh:
        fh.write('{"messages": [\n[1, 2]\n')
    paths["malformed_out"] = work / "out-malformed"
    case("malformed", *_args(qwen36_dir, malformed, paths["malformed_out"]))
    paths["unicode"] = unicode = write_dataset(work / "unicode.jsonl", good_rows(4))
    with unicode.open("a", encoding="utf-8") as fh:  # JSON escapes, as a JSON writer leaves them
        fh.write('{"messages": [{"role": "user", "content": "a lone \\ud83d here"}, '
                 '{"role": "assistant", "content": "Sure."}]}\n')  # fmt: skip
        fh.write('{"messages": [{"role": "user", "content": "a pair \\ud83d\\ude00 here"}, '
                 '{"role": "assistant", "content": "Nice \\ud83d\\ude00."}]}\n')  # fmt: skip
        fh.write('{"messages": [{"role": "user", "content": "Hi"}, '
                 '{"role": "assistant", "content": "cut \\uDE00 off"}]}\n')  # fmt: skip
        # in a column the conversation does not use: kept
        fh.write('{"note": "a lone \\ud83d", "messages": [{"role": "user", "content": "Yo"}, '
                 '{"role": "assistant", "content": "Hello."}]}\n')  # fmt: skip
        # inside tool-call arguments held as JSON text (the template gets them parsed)
        call = {"type": "function", "function": {"name": "f", "arguments": '{"q": "\\ud83d"}'}}
        fh.write(json.dumps({"messages": [
            {"role": "user", "content": "Call f."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "done"},
            {"role": "assistant", "content": "Done."}]}) + "\n")  # fmt: skip
    paths["unicode_out"] = work / "out-unicode"
    case("unicode", *_args(qwen36_dir, unicode, paths["unicode_out"]))
    paths["garbage"] = garbage = work / "g.jsonl"
    garbage.write_text("not json\nstill not\n")
    case("garbage", *_args(qwen36_dir, garbage, work / "o1"))
    empty = work / "e.jsonl"
    empty.write_text("")
    case("empty", *_args(qwen36_dir, empty, work / "o2"))
    case("render_local", *_args(qwen36_dir, data, work / "o3", "--render-endpoint", "local"))
    # the form our entry point hands the map workers, typed by hand: would trust the model's code
    trusted = f"local-trusted:{qwen36_dir}"
    paths["o4"] = work / "o4"
    case("render_local_path", *_args(qwen36_dir, data, paths["o4"], "--render-endpoint", trusted))
    # an inline image written to <output>-media, then no row left (nothing to supervise)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _PNG}}
    only_prompts = [{"messages": [{"role": "user", "content": [image, {"type": "text",
                                                                       "text": f"Look {i}."}]}]}
                    for i in range(2)]  # fmt: skip
    paths["inline_out"] = work / "out-inline"
    inline = write_dataset(work / "inline.jsonl", only_prompts)
    case("inline_then_fatal", *_args(qwen36_dir, inline, paths["inline_out"]))

    results = run_batch(work / "logs", runs)
    return {"paths": paths, "results": results}


def _png() -> str:
    """A 1x1 PNG, base64 (no Pillow in the base venv)."""
    import base64
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
    png += chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


_PNG = _png()


def test_a_failed_run_names_the_media_folder_it_leaves(cases: dict) -> None:
    """Images a failed run wrote stay (no run deletes what it or an earlier run wrote) and its
    line says where they are."""
    message = _fatal(cases["results"]["inline_then_fatal"])
    media = Path(str(cases["paths"]["inline_out"]) + "-media")
    written = [p for p in media.iterdir() if not p.name.startswith(".")]
    assert len(written) == 1, written  # both rows hold the same image: one file
    assert f"the 1 images in {media} stay (a rerun with the same --output reuses" in message
    assert not cases["paths"]["inline_out"].exists()


def _fatal(result) -> str:
    assert result.returncode == 1, result.stderr[-3000:]
    line = last_line(result.stderr)
    assert line.startswith(PREFIX), result.stderr[-3000:]
    return line[len(PREFIX) :]


def test_missing_model_is_one_line_and_debug_shows_the_traceback(cases: dict) -> None:
    result = cases["results"]["missing_model"]
    message = _fatal(result)
    assert "no-such-model" in message and "--debug" in message
    assert "Traceback" not in result.stderr
    debug = cases["results"]["missing_model_debug"]
    assert "Traceback" in debug.stderr
    assert last_line(debug.stderr).startswith(PREFIX)


def test_missing_data_file(cases: dict) -> None:
    message = _fatal(cases["results"]["missing_data"])
    assert message == f"--data {cases['paths']['nope']}: no such file"


def test_no_conversation_column_names_the_columns(cases: dict) -> None:
    message = _fatal(cases["results"]["no_column_flat"])
    assert "no conversation column (columns found: completion, prompt)" in message
    assert "pass --prompt-column prompt --response-column completion" in message
    message = _fatal(cases["results"]["no_column_other"])
    assert "no conversation column (columns found: id, text)" in message
    assert "--conversations-key" in message


def test_every_row_rejected_is_an_error_with_the_reasons(cases: dict) -> None:
    message = _fatal(cases["results"]["all_rejected"])
    assert message.startswith("no conversation survived preprocessing (skipped 4 of 4")
    assert '2 x "No user query found in messages."' in message


def test_malformed_lines_are_counted_and_good_rows_kept(cases: dict) -> None:
    result = cases["results"]["malformed"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(cases["paths"]["malformed_out"])
    assert report["conversations_in"] == 8
    assert report["skipped"] == {"malformed JSON line": 1, "row is not a JSON object": 1}
    assert report["skipped_examples"]["malformed JSON line"] == [f"{cases['paths']['malformed']}:7"]


def test_invalid_unicode_is_a_counted_skip_and_good_rows_are_kept(cases: dict) -> None:
    """A lone surrogate escape (``\\ud83d``, ``\\uDE00``) in what reaches the template (tool-call
    arguments held as JSON text included) is the row's problem, counted under its own reason; a
    surrogate pair is valid Unicode (an emoji) and kept, and so is a row whose lone surrogate
    sits in a column the conversation does not use."""
    from datasets import load_from_disk

    result = cases["results"]["unicode"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(cases["paths"]["unicode_out"])
    assert report["conversations_in"] == 9 and report["errors"] == 0, report
    assert report["skipped"] == {INVALID_UNICODE: 3}, report
    data = cases["paths"]["unicode"]
    skipped = sorted(report["skipped_examples"][INVALID_UNICODE])
    assert skipped == [f"{data}:5", f"{data}:7", f"{data}:9"], skipped
    assert report["conversations_kept"] == 6
    assert len(load_from_disk(str(cases["paths"]["unicode_out"]))) == report["rows_out"]


def test_a_file_of_garbage_and_an_empty_file(cases: dict) -> None:
    garbage = cases["paths"]["garbage"]
    assert _fatal(cases["results"]["garbage"]).startswith(f"{garbage}:1: ")
    assert "holds no rows" in _fatal(cases["results"]["empty"])


def test_render_endpoint_only_where_upstream_renders(cases: dict) -> None:
    """``local`` renders with --model; ``local:PATH``/``local-trusted:PATH``, how the map workers
    get it, is refused when a user names it (another model's tokenizer, or its code trusted
    without --trust-remote-code)."""
    result, by_hand = cases["results"]["render_local"], cases["results"]["render_local_path"]
    if RENDERS:
        assert result.returncode == 0, result.stderr[-3000:]
        message = _fatal(by_hand)
        assert message.startswith("--render-endpoint local-trusted:"), message
        assert not cases["paths"]["o4"].exists()
        return
    for done in (result, by_hand):  # <= 0.7 tokenize locally and have no such flag
        assert done.returncode == 2
        assert "unrecognized arguments: --render-endpoint" in done.stderr


def test_overwrite_refuses_to_delete_other_files(qwen36_dir: Path, tmp_path: Path) -> None:
    """Three runs into one folder, in one interpreter (run_batch): a first run, an --overwrite
    refused because of a file of the user's, and one allowed once the file is gone."""
    data = write_dataset(tmp_path / "d.jsonl", good_rows(3))
    output = tmp_path / "out"
    notes, kept = output / "notes.txt", tmp_path / "notes-after-refusal.txt"
    cases = {
        "first": _args(qwen36_dir, data, output),
        "refused": _args(qwen36_dir, data, output, "--overwrite"),
        "rerun": _args(qwen36_dir, data, output, "--overwrite"),
    }
    steps = {
        "refused": {"write": {str(notes): "mine"}, "copy_after": {str(notes): str(kept)}},
        "rerun": {"unlink": [str(notes)]},
    }
    results = run_batch(tmp_path / "logs", cases, steps=steps)
    assert results["first"].returncode == 0, results["first"].stderr[-3000:]
    message = _fatal(results["refused"])
    assert "notes.txt" in message
    assert kept.read_text() == "mine"  # notes.txt as the refused run left it
    rerun = results["rerun"]
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert read_report(output)["rows_out"] > 0


def _folder_of_length(parent: Path, length: int) -> Path:
    """An existing folder under ``parent`` whose path is ``length`` bytes long."""
    folder = parent / ("d" * (length - len(str(parent)) - 1))
    folder.mkdir()
    assert len(str(folder)) == length
    return folder


@pytest.mark.pure  # the same check on every release
def test_a_temporary_folder_too_long_for_the_workers_socket(
    qwen36_dir: Path, tmp_path: Path
) -> None:
    """The limit is the real library's (a multiprocess manager, as datasets' map starts one,
    starts in a folder of the limit's length and dies one byte past it), and a run in a longer
    folder ends with one line naming the fix, not the bare EOFError the map would raise."""
    room = SOCKET_PATH_LIMIT - MANAGER_SUFFIX
    # in the system's temporary folder: tmp_path itself may be too deep already
    with tempfile.TemporaryDirectory(prefix="sqc-") as temporary:
        short = Path(temporary)
        fits, too_long = _folder_of_length(short, room), _folder_of_length(short, room + 1)
        assert run_program("start_manager", TMPDIR=str(fits)).stdout.strip() == "started"
        died = run_program("start_manager", TMPDIR=str(too_long))
        assert died.returncode != 0 and "AF_UNIX path too long" in died.stderr, died.stderr
        data = write_dataset(tmp_path / "d.jsonl", good_rows(2))
        output = tmp_path / "out"
        ran = run_batch(
            tmp_path / "logs", {"deep": _args(qwen36_dir, data, output)}, TMPDIR=str(too_long)
        )["deep"]
    message = _fatal(ran)
    assert message.startswith(f"the temporary folder {too_long} is too long"), message
    assert "TMPDIR=/tmp" in message and "Traceback" not in ran.stderr
    assert not output.exists()


@pytest.mark.skipif(not RENDERS, reason="0.8+'s typer command (<= 0.7: argparse's own usage)")
def test_a_command_line_mistake_is_the_users_not_a_bug(qwen36_dir: Path, tmp_path: Path) -> None:
    """Two files after one --data (click's "extra argument"): one line saying how the flag is
    given, not a request to send a traceback."""
    data = write_dataset(tmp_path / "a.jsonl", good_rows(2))
    args = prepare_args(qwen36_dir, tmp_path / "out", data, workers=1)
    result = run_prepare(*args, str(data))
    assert result.returncode != 0
    line = last_line(result.stderr)
    assert line.startswith("speculators_qwen_compat: error: Got unexpected extra argument")
    assert "--data A --data B" in line and "--debug" not in line, line
    assert not (tmp_path / "out").exists()
