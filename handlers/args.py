"""One argument mechanism for every /gemma subcommand: each command declares an argparse parser once.

The router parses the words before the handler runs (the handler reads `ctx.opts`), so usage lines in
`/gemma help`, `/gemma help CMD` / `CMD --help`, and the wording of every bad-argument error come from the
declared parser. argparse's exits become InvalidInput carrying the command's usage: a sys.exit would kill
the bot process.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import NoReturn

from skills.errors import InvalidInput

HELP_FLAGS = ("-h", "--help")
# No command takes more words than this (the longest, `deploy` with every override, takes ~20); argparse's
# handling of many unknown options is quadratic (10,000 `--x` words took 17 s), so a flood is refused first.
MAX_WORDS = 64
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _one_line(prog: str) -> argparse.HelpFormatter:
    # Slack wraps text itself; argparse's 80-column wrapping would break usage lines mid-option.
    return argparse.HelpFormatter(prog, width=10_000, max_help_position=36)


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not `{text}`") from None


def count(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """A whole number within [lo, hi]: `-3` or `0` for "how many" is refused, not clamped or misread."""

    def parse(text: str) -> int:
        n = whole_number(text)
        if n < lo or (hi is not None and n > hi):
            span = f"from {lo} to {hi}" if hi is not None else f"of at least {lo}"
            raise argparse.ArgumentTypeError(f"must be a whole number {span}, not `{text}`")
        return n

    return parse


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not `{text}`") from None


def number_list(text: str) -> list[int]:
    """'1,8,32' (spaces allowed when quoted) -> [1, 8, 32]."""
    try:
        nums = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs numbers, got `{text}`") from None
    if not nums:
        raise argparse.ArgumentTypeError("needs a value")
    return nums


def _usage_of(action: argparse.Action) -> str:
    """One argument as usage shows it, argparse's conventions: `SERVICE`, `[N]`, `[--since DURATION]`."""
    metavar = action.metavar if isinstance(action.metavar, str) else None
    if metavar is None and action.choices is not None:
        metavar = "{" + ",".join(map(str, action.choices)) + "}"
    if not action.option_strings:
        m = metavar or action.dest
        return {"?": f"[{m}]", "*": f"[{m} ...]", "+": f"{m} [{m} ...]"}.get(str(action.nargs), m)
    if action.nargs == 0:
        part = " | ".join(action.option_strings) if isinstance(action, argparse.BooleanOptionalAction) else ""
        part = part or action.option_strings[0]
    else:
        part = f"{action.option_strings[0]} {metavar or action.dest.upper()}"
    return part if action.required else f"[{part}]"


def _wording(message: str) -> str:
    """argparse's messages, said the way the rest of the bot speaks."""
    if message.startswith("the following arguments are required: "):
        return f"Missing {message.split(': ', 1)[1]}."
    if message.startswith("unrecognized arguments: "):
        words = message.split(": ", 1)[1].split(" ")
        unknown = [w for w in words if w.startswith("-")]
        if unknown:
            return f"Unknown option `{unknown[0].split('=', 1)[0]}`."
        return "Unexpected argument" + ("s " if len(words) > 1 else " ") + ", ".join(f"`{w}`" for w in words) + "."
    m = re.fullmatch(r"argument ([^:]+): (.*)", message, re.S)
    if m:
        name, what = m.group(1).split("/")[0], m.group(2)
        if what in ("expected one argument", "expected at least one argument"):
            return f"`{name}` needs a value."
        return f"`{name}`{':' if what.startswith(('invalid', 'ignored')) else ''} {what}."
    return f"Bad arguments: {message}."


class CommandParser(argparse.ArgumentParser):
    """A /gemma subcommand's arguments. `free_text`: the words are a prompt (nothing in it is an option);
    `key_values` (set by a declaration): `name=value` words set the option `--name`. `hint` follows the
    usage in every error."""

    def __init__(
        self, name: str, summary: str = "", *, free_text: bool = False, hint: str | Callable[[], str] = ""
    ) -> None:
        super().__init__(
            prog=f"/gemma {name}",
            description=summary or None,
            add_help=False,
            allow_abbrev=False,
            formatter_class=_one_line,
        )
        self.name = name
        self.free_text = free_text
        self.hint = hint
        self.key_values = False

    def _words(self, max_options: int | None = None) -> str:
        """Positionals first, as people type them (`status [SERVICE] [--fresh]`); argparse's own wording of
        each argument. More than `max_options` options fold into `[options]`."""
        positionals = [_usage_of(a) for a in self._actions if not a.option_strings]
        options = [_usage_of(a) for a in self._actions if a.option_strings]
        if max_options is not None and len(options) > max_options:
            options = ["[options]"]
        return " ".join(positionals + options)

    def format_usage(self) -> str:
        return f"usage: {self.prog} {self._words()}".strip() + "\n"

    def format_help(self) -> str:
        self.usage = f"%(prog)s {self._words()}".strip()  # the help's usage line in the same order
        # The hint every error gives (profiles, models, an example) ends the help too; help is shown as code,
        # so without Slack's backticks.
        self.epilog = self._hint().replace("`", "").replace("%", "%%") or None
        return super().format_help()

    def _hint(self) -> str:
        return self.hint() if callable(self.hint) else self.hint  # a callable: read when needed (profiles)

    def usage_line(self) -> str:
        """'status [SERVICE] [--fresh]': the full usage, without the '/gemma ' prefix."""
        return f"{self.name} {self._words()}".strip()

    def short_usage(self, max_options: int = 4) -> str:
        """One line for the `/gemma help` list: long option lists are folded into `[options]`."""
        return f"{self.name} {self._words(max_options)}".strip()

    def usage_hint(self) -> str:
        hint = self._hint()
        return f"Usage: `/gemma {self.usage_line()}`" + (f" — {hint}" if hint else "")

    def wants_help(self, argv: list[str]) -> bool:
        if self.free_text:
            return bool(argv) and argv[0] in HELP_FLAGS
        return any(a in HELP_FLAGS for a in argv)

    def parse(self, argv: list[str]) -> argparse.Namespace:
        if not self.free_text and len(argv) > MAX_WORDS:
            raise InvalidInput(
                f"Too many arguments ({len(argv)}; `/gemma {self.name}` takes at most {MAX_WORDS}).",
                self.usage_hint(),
            )
        if self.free_text:
            argv = ["--", *argv]  # a question may contain '--max-model-len': words, not options
        elif self.key_values:
            argv = [self._key_value(a) for a in argv]
        return self.parse_args(self._glue_dash_values(argv))

    def _glue_dash_values(self, argv: list[str]) -> list[str]:
        """`--since -3h`: argparse reads a value that starts with '-' as an option and says "expected one
        argument"; glued as `--since=-3h` it reaches the option's own check, which says what is wrong with it."""
        takes_value = {
            opt
            for a in self._actions
            if a.option_strings and a.nargs is None and not isinstance(a, argparse._StoreConstAction)
            for opt in a.option_strings
        }
        out: list[str] = []
        i = 0
        while i < len(argv):
            word = argv[i]
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if word == "--":
                out.extend(argv[i:])
                break
            if (
                word in takes_value
                and nxt
                and nxt.startswith("-")
                and nxt.split("=", 1)[0] not in self._option_string_actions
            ):
                out.append(f"{word}={nxt}")
                i += 2
                continue
            out.append(word)
            i += 1
        return out

    def _key_value(self, word: str) -> str:
        """`max_model_len=8192` -> `--max-model-len=8192`; a boolean's `=value` picks `--x` or `--no-x`."""
        name, eq, value = word.removeprefix("--").partition("=")
        flag = "--" + name.replace("_", "-")
        if not eq or (not word.startswith("--") and flag not in self._option_string_actions):
            return word
        action = self._option_string_actions.get(flag)
        if isinstance(action, argparse.BooleanOptionalAction):
            if value.lower() in _TRUE:
                return flag
            if value.lower() in _FALSE:
                return "--no-" + flag[2:]
            self.error(f"argument {flag}: takes true or false, not `{value}`")
        return f"{flag}={value}"

    def error(self, message: str) -> NoReturn:
        raise InvalidInput(_wording(message), self.usage_hint())

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise InvalidInput((message or "Bad arguments.").strip(), self.usage_hint())


ArgsFn = Callable[[CommandParser], object]  # declares the arguments (a lambda may return the Action)
