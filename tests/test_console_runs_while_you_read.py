"""The console keeps running while the prompt waits (issue 49): at a real terminal, a deploy watch interrupted by
Ctrl-C finishes in the background and says so above the prompt with nothing typed, and the audit then records
its outcome, not `pending`."""

from __future__ import annotations

from pathlib import Path

import pexpect

from tests.terminal import PROMPT, plain, run_line, spawn_console, until_quiet


def test_a_watch_left_by_ctrl_c_finishes_while_the_prompt_waits(tmp_path: Path) -> None:
    # A cold start of minutes at 20x takes long enough to press Ctrl-C during it, and ends well within the wait.
    child = spawn_console(tmp_path, timeout=90, SANDBOX_SPEED="20", DEPLOY_POLL_S="0.2")
    try:
        run_line(child, "/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192")
        child.sendline("click Confirm")
        child.expect_exact("revision created")  # the watch is following the revision now
        child.sendintr()
        child.expect(PROMPT)
        assert "goes on in the background" in plain(child.before)
        # Nothing typed from here: the outcome still arrives, above the waiting prompt.
        child.expect_exact("deploy `vllm-gemma4`: ready")
        until_quiet(child)
        audit = run_line(child, "/gemma audit 1")
        assert "pending" not in audit and " ok" in audit, audit
        child.sendline("quit")
        child.expect(pexpect.EOF)
        assert "Traceback" not in plain(child.before)
    finally:
        child.close(force=True)
