"""A fork server for bench/mutation.py: one per worker, in that worker's copy of the checkout.

Starting pytest costs seconds, most of it importing the libraries the tests use (the Google, Slack, MCP and
OpenAI clients, pydantic, Starlette). This process imports them once, through the tests' conftest, then forgets
every module of the project itself (bot, handlers, skills, prompts, tests, bench) so that a forked child imports
those from the copy's files again, the mutated one included. Each job is one pytest run in a forked child:

    argv    the test files the jobs will run (their imports are loaded once, here)
    stdin   {"args": [pytest arguments], "timeout": seconds, "log": path}     one JSON object a line
    stdout  {"rc": pytest's exit code, or -1 when the run was stopped at its timeout, "secs": wall seconds}

The child runs in a process group of its own, so a timeout stops whatever it started too. The child writes no
bytecode: bench/mutation.py removes a mutated module's cached bytecode before the run and recompiles the
original after it.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time

_OWN = ("bot", "handlers", "skills", "prompts", "tests", "bench")


def _preload(test_files: list[str]) -> None:
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # anything printed while importing must not reach the protocol pipe
    try:
        from importlib.metadata import entry_points

        import pytest  # noqa: F401

        for ep in entry_points(group="pytest11"):  # pytest's plugins (hypothesis alone takes ~2 s)
            ep.load()
        import hypothesis.strategies  # noqa: F401  (its pytest plugin defers this import to the first run)

        # What pytest will import for the jobs, imported once here as pytest would (by path, as modules of the
        # copy): the conftest and the test files, whose imports of the libraries are the expensive part.
        for f in ["tests/conftest.py", *test_files]:
            try:
                importlib.import_module(f.removesuffix(".py").replace("/", "."))
            except Exception as exc:  # noqa: BLE001 - a module that fails here fails in the run, where it counts
                print(f"preload: {f}: {exc!r}", file=sys.stderr)
    finally:
        sys.stdout = real_stdout
    for name in [n for n in sys.modules if n.split(".", 1)[0] in _OWN]:
        del sys.modules[name]


def _run(args: list[str], timeout: float, log: str) -> dict[str, float | int]:
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: one pytest run
        try:
            os.setpgrp()
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.dont_write_bytecode = True
            import pytest

            rc = int(pytest.main(args))
        except BaseException:  # noqa: BLE001 - whatever happens, the child must end here with a code
            rc = 3
        os._exit(rc)
    rc = -1
    deadline = started + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            rc = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(pid, sig)
                except ProcessLookupError:
                    pass
                time.sleep(0.5)
            os.waitpid(pid, 0)
            rc = -1
            break
        time.sleep(0.02)
    try:
        os.killpg(pid, signal.SIGKILL)  # anything the run left behind (a server it started)
    except ProcessLookupError:
        pass
    return {"rc": rc, "secs": round(time.monotonic() - started, 2)}


def main() -> None:
    sys.path.insert(0, os.getcwd())
    _preload(sys.argv[1:])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        print(json.dumps(_run(job["args"], float(job["timeout"]), job["log"])), flush=True)


if __name__ == "__main__":
    main()
