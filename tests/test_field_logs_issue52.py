"""Issue 52: real vLLM logs the rules had never seen (tests/data/field_logs_issue52_tuning; sources in its manifest).

- A log written by a Windows shell (UTF-16 with a BOM, UTF-8 with a BOM, CRLF line ends) reads as text wherever
  logs are read: `gemma-sre diagnose`, the line reader, the corpus reader.
- `torch_compile_failed` comes from a compile exception or the compiler at work, never from a frame's path under
  `vllm/compilation/` alone (a compiled graph being run, or nothing compiled under --enforce-eager).
- A server stopped from outside during start-up (SIGTERM) is said as such (`startup_interrupted`), with what to
  check; the traceback its SIGTERM handler prints is never the decisive error.
- A quantized layer whose per-rank size does not divide by its kernel's tile is an engine start-up failure that says
  so, not a container that exited before the engine.

Only the tuning half is read here; the held-out half is scored by bench/diagnosis_corpus.py.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from bot.cli import main as cli_main
from skills.diagnosis.corpus_eval import diagnose_file, score_corpus
from skills.diagnosis.diagnose import diagnose
from skills.logs.fetch import parse_lines
from skills.logs.input_format import decode_log_bytes, utf8_chunks
from skills.ports import LogEntry

DATA = Path(__file__).parent / "data"
TUNING = DATA / "field_logs_issue52_tuning"
SIGTERM = TUNING / "instructlab2092_vllm_sigterm_worker_exit_15.log"
SIGTERM_UTF16 = TUNING / "instructlab2092_vllm_sigterm_worker_exit_15_utf16le_bom_crlf.log"
COMPILED = TUNING / "vllm32467_glm46_compiled_forward_cut.log"
COMPILED_UTF8_BOM = TUNING / "vllm32467_glm46_compiled_forward_cut_utf8_bom_crlf.log"
TILE_N = TUNING / "glm45_94_fp8_marlin_tile_n_2736.log"
SCALES = TUNING / "vllm49949_nvfp4_moe_marlin_size_k_scales.log"
MIN_THREAD_K = TUNING / "llmcompressor54_marlin_min_thread_k_7392.log"
# Real lines from other public logs, used to put the tuning logs in context (sources beside each).
# vllm-project/vllm#44483 (vLLM 0.2x with --enforce-eager): vllm/config/vllm.py's warning.
ENFORCE_EAGER = (
    "(EngineCore_DP0 pid=5906) WARNING 06-17 04:09:33 [vllm.py:1090] Enforce eager set, disabling torch.compile and "
    "CUDAGraphs. This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none"
)
# vllm-project/vllm#17386 (vLLM 0.8.5, gemma-3-1b-it on Kubernetes, stopped by its startup probe: the thread that led
# to vLLM's docs naming this case): the last lines before the stop, the engine compiling.
COMPILING = [
    "INFO 05-08 00:41:42 [loader.py:458] Loading weights took 6.71 seconds",
    "INFO 05-08 00:41:43 [gpu_model_runner.py:1347] Model loading took 14.9596 GiB and 8.705854 seconds",
    "DEBUG 05-08 00:41:43 [decorators.py:203] Start compiling function <code object forward at 0xcdef740, file "
    '"/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/llama.py", line 343>',
    "DEBUG 05-08 00:41:45 [core.py:392] EngineCore exiting.",
]
# tests/data/field_logs/codelab1550_port_8000_timeout.log: Cloud Run's startup probe gave up.
PROBE = (DATA / "field_logs" / "codelab1550_port_8000_timeout.log").read_text().splitlines()
# tests/data/field_logs/healthy_vllm8719_a100_busy_systemd.log: a server that was up and serving.
SERVING = (DATA / "field_logs" / "healthy_vllm8719_a100_busy_systemd.log").read_text().splitlines()


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _entries(*texts: str) -> list[LogEntry]:
    return [LogEntry(text=t) for t in texts if t.strip()]


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = cli_main(list(args))
    finally:
        sys.stdout, sys.stderr = real
    return code, out.getvalue(), err.getvalue()


# --- (a) any text encoding --------------------------------------------------------------------------------------


def test_the_encoded_copies_are_what_a_windows_shell_writes() -> None:
    assert SIGTERM_UTF16.read_bytes()[:2] == b"\xff\xfe" and b"\r\x00\n\x00" in SIGTERM_UTF16.read_bytes()
    assert COMPILED_UTF8_BOM.read_bytes()[:3] == b"\xef\xbb\xbf" and b"\r\n" in COMPILED_UTF8_BOM.read_bytes()


def test_decoding_gives_back_the_real_lines() -> None:
    for encoded, plain in ((SIGTERM_UTF16, SIGTERM), (COMPILED_UTF8_BOM, COMPILED)):
        text = decode_log_bytes(encoded.read_bytes())
        assert text.splitlines() == plain.read_text(encoding="utf-8").splitlines()
        assert not text.startswith("\ufeff")


def test_the_stream_decoder_does_not_care_where_chunks_split() -> None:
    data = SIGTERM_UTF16.read_bytes()
    whole = b"".join(utf8_chunks([data]))
    for size in (1, 3, 4, 7):
        assert b"".join(utf8_chunks(data[i : i + size] for i in range(0, len(data), size))) == whole
    assert whole.decode("utf-8").replace("\r\n", "\n") == SIGTERM.read_text(encoding="utf-8")


def test_cli_reads_utf16_and_a_bom_as_the_same_log(tmp_path: Path) -> None:
    for encoded, plain in ((SIGTERM_UTF16, SIGTERM), (COMPILED_UTF8_BOM, COMPILED)):
        code, out, err = _cli("diagnose", "--logs", str(encoded), "--format", "json")
        assert code == 0, err
        want_code, want, _ = _cli("diagnose", "--logs", str(plain), "--format", "json")
        assert want_code == 0
        got, expected = json.loads(out), json.loads(want)
        assert got["findings"] == expected["findings"]
        assert got["digest"]["malformed"] == 0
        assert got["digest"]["lines_in"] == expected["digest"]["lines_in"]


def test_a_utf16_gcloud_json_array_reads_too(tmp_path: Path) -> None:
    """`gcloud logging read --format=json > logs.json` in Windows PowerShell 5.1 writes UTF-16LE with a BOM."""
    entries = [{"textPayload": line, "severity": "ERROR"} for line in _lines(TILE_N)]
    f = tmp_path / "logs.json"
    f.write_bytes(b"\xff\xfe" + json.dumps(entries, indent=2).replace("\n", "\r\n").encode("utf-16-le"))
    code, out, err = _cli("diagnose", "--logs", str(f), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["digest"]["malformed"] == 0


def test_a_utf16_log_through_a_real_process() -> None:
    root = Path(__file__).resolve().parent.parent
    run = subprocess.run(
        [sys.executable, "-m", "bot.cli", "diagnose", "--logs", "-", "--format", "json"],
        input=SIGTERM_UTF16.read_bytes(),
        capture_output=True,
        cwd=root,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert b"binary data" not in run.stderr


def test_the_line_reader_and_the_corpus_reader_decode_too() -> None:
    with SIGTERM_UTF16.open("rb") as fh:
        entries, malformed = parse_lines(fh)
    assert malformed == 0
    assert [e.text for e in entries] == _lines(SIGTERM)
    assert diagnose_file(SIGTERM_UTF16).kinds() == diagnose_file(SIGTERM).kinds()
    assert diagnose_file(COMPILED_UTF8_BOM).kinds() == diagnose_file(COMPILED).kinds()


# --- (b) torch_compile_failed from the exception and what the engine was doing ---------------------------------


def test_a_compiled_graph_being_run_is_not_a_compile_failure() -> None:
    """vllm/compilation/caching.py __call__ runs a graph compiled earlier: a frame there says nothing was compiling."""
    assert "torch_compile_failed" not in diagnose_file(COMPILED).kinds()


def test_under_enforce_eager_a_compilation_frame_is_not_a_compile_failure() -> None:
    d = diagnose(_entries(ENFORCE_EAGER, *_lines(COMPILED)))
    assert "torch_compile_failed" not in d.kinds()


# --- (c) stopped from outside during start-up -------------------------------------------------------------------


def test_a_sigterm_during_start_up_is_said_as_such() -> None:
    d = diagnose_file(SIGTERM)
    assert d.root_kinds() == ["startup_interrupted"]
    f = d.findings[0]
    assert "stopped from outside during start-up" in f.title
    assert any("died, exit code: -15" in e for e in f.evidence)
    steps = " ".join(f.remediation.steps)
    assert "startup probe" in steps and "kubectl get events" in steps
    # The traceback the interrupt printed is not the error: no finding quotes it as the cause.
    assert not any(e.endswith("KeyboardInterrupt") for x in d.findings for e in x.evidence)


def test_the_engine_exiting_while_compiling_is_a_stop_from_outside() -> None:
    """vllm/v1/engine/core.py run_engine_core: its SIGTERM/SIGINT handler raises SystemExit, logged at DEBUG as
    "EngineCore exiting."; here, all vllm#17386's log shows of the probe's SIGTERM."""
    d = diagnose(_entries(*COMPILING))
    assert d.root_kinds() == ["startup_interrupted"]
    assert "stopped from outside during start-up, while compiling the model (torch.compile)" in d.findings[0].title
    assert "torch_compile_failed" not in d.kinds()


def test_stopped_while_compiling_says_so_and_is_no_compile_failure() -> None:
    d = diagnose(_entries(*COMPILING, *_lines(SIGTERM)))
    assert d.root_kinds() == ["startup_interrupted"]
    assert "while compiling the model (torch.compile)" in d.findings[0].title
    assert "torch_compile_failed" not in d.kinds()


def test_a_probe_that_gave_up_is_why_it_was_stopped() -> None:
    d = diagnose(_entries(*PROBE, *_lines(SIGTERM)))
    assert d.root_kinds() == ["startup_probe_timeout"]
    assert {f.kind: f.caused_by for f in d.findings}["startup_interrupted"] == "startup_probe_timeout"


def test_a_real_error_before_the_stop_stays_the_cause() -> None:
    d = diagnose(_entries(*_lines(TILE_N), *_lines(SIGTERM)))
    assert d.root_kinds() == ["engine_startup_failed"]
    assert "2736" in d.findings[0].title
    assert {f.kind: f.caused_by for f in d.findings}.get("startup_interrupted") == "engine_startup_failed"


def test_a_stop_after_the_server_was_up_is_a_shutdown_not_a_failure() -> None:
    d = diagnose(_entries(*SERVING, *_lines(SIGTERM)))
    assert "startup_interrupted" not in d.kinds()
    assert not d.root_kinds()


# --- (d) a quantized kernel's tile --------------------------------------------------------------------------------


def test_a_kernel_tile_failure_is_an_engine_start_up_failure_that_says_so() -> None:
    for path, size in ((TILE_N, "2736"), (SCALES, "256"), (MIN_THREAD_K, "7392")):
        d = diagnose_file(path)
        assert d.root_kinds() == ["engine_startup_failed"], path.name
        f = d.findings[0]
        assert "not divisible" in f.title and size in f.title, f.title
        steps = " ".join(f.remediation.steps)
        assert "--tensor-parallel-size" in steps and "--enable-expert-parallel" in steps, steps


def test_the_tuning_half_meets_the_bar() -> None:
    score = score_corpus(TUNING)
    assert score.exact == score.logs, [r for r in score.misses()]
