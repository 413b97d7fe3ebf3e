"""Group log lines into templates ("PacketResponder <*> for block <*> terminating").

A small online grouper in the spirit of Drain: mask variables, split into tokens, then look a line up by
(token count, first constant tokens) and merge it into the most similar template there if enough positions
agree. Measured against drain3 on Loghub by bench/log_grouping.py, on the 8 systems in the repository and on
the other Loghub systems (kept out of it, so that they measure how well one configuration generalises).

Variables are not always whitespace-separated tokens, so masking looks inside tokens for the usual shapes:
`host:port`, `key=value`, paths, dotted names (hosts, packages, loggers), ids mixing letters and digits
(`node-12`, `wl0`, `jA9J1dQ7016560`), numbers with their unit (`2048 MB`, `<1 sec`), bracketed numeric
annotations (`(1.98 KB)`) and quoted values of one word or several (`'Default Web Access'`). A word value
(`user=root`, `for root`) is a variable once VARIANTS groups differ only there; fewer values are different events
(`VM Started` / `VM Stopped`). One configuration for every system; no per-system rules.
"""

from __future__ import annotations

import re
from itertools import compress, count
from operator import ne

WILDCARD = "<*>"

# Whole-token shapes that are always variables (checked on the token stripped of edge punctuation).
_VAR_TOKEN = re.compile(
    r"""(?x)
      (?:[\w-]+\.)+[\w-]+:\d+                      # host:port, host.name:port
    | \w[\w-]*(?:\.[\w-]+)+\.[a-z]+                # host names, dotted names ending lower-case (not Java classes)
    | (?:[\w.~-]*/){2,}[\w.~-]*                    # paths: /var/lib/x, a/b/c (two slashes or more)
    | [\w.+-]+@[\w.-]+                             # principals and addresses: team7@BIGDATA, a@b.c
    """
)
_EDGE = "()[]{}<>,;:'\"."
# Time-zone abbreviations printed after a time. Z is left out (a word of its own too often); the list is the
# common ones of the IANA tz database's abbreviations (tzdata), not all of them.
_TIME_ZONES = frozenset(
    "UTC GMT EST EDT CST CDT MST MDT PST PDT AKST AKDT HST CET CEST EET EEST WET WEST BST IST JST KST AEST AEDT "
    "ACST ACDT AWST NZST NZDT MSK SGT HKT".split()
)
# Day and month names are parts of dates inside the text (variables), not words of the event.
_DATE_WORDS = frozenset("Mon Tue Wed Thu Fri Sat Sun Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())
# Masks applied inside a token (one combined pass, first alternative wins at each position).
_MASKS = [
    r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b",  # IPv4[:port]
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",  # UUID
    r"\b0x[0-9a-fA-F]+\b",
    r"(?<![\w.])\d+(?:[-/:.]\d+)+(?![\w])",  # dates, times, versions: 11-20, 14:00:01, 2.62
    # words holding a digit: numbers, ids (blk_-1, node-12), but not names ending in one digit (eth1, SOCKS5)
    r"(?<![\w-])(?![A-Za-z]+\d(?![\w-]))[\w-]*\d[\w-]*",
]
# Every mask starts after a non-word character (or at the start): checking that first lets the search skip the
# positions inside a word without trying each alternative there.
_MASK = re.compile(r"(?<!\w)(?:" + "|".join(f"(?:{rx})" for rx in _MASKS) + ")")
# What every match of _MASK holds: a digit, or the start of a UUID (see _classify).
_MAY_MASK = re.compile(r"\d|[0-9a-fA-F]{8}-")
# The same patterns for ASCII tokens (most): on ASCII text \w, \d and \b mean what they mean in Unicode mode, and
# the regular expression engine tests ASCII classes without looking up Unicode properties.
_VAR_TOKEN_ASCII = re.compile(_VAR_TOKEN.pattern, re.ASCII)
_MASK_ASCII = re.compile(_MASK.pattern, re.ASCII)
# A number followed by its unit is one variable ("2048 MB" -> "<*>"), as is a comparison ("<1 sec").
_UNITS = {"b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "bytes", "ms", "us", "s", "sec", "secs", "seconds", "min"}
# A word-only difference ("shutdown" vs "startup") is a different event unless the statement names that
# position as a value (see _named_value), or this many groups differ only there (then it is a variable whose
# kind the line does not name) and the line has this many other constant words. Counting only constant words
# keeps short echoed commands ("<header>: display version" / "display license") apart: their header is all
# variables, so a command word is most of what the line says.
VARIANTS = 5
MIN_ANCHORS = 3
# Words after which a statement prints the name of an account: the next word is a value, at once.
_ACCOUNT_WORDS = frozenset({"user", "User", "USER", "username", "account", "login"})
# Words that name a state: the words up to four after them ("state Idle", "changed state to down", "state from Down
# to Up", "New State active") is that state's value. A state takes few values (up / down), so VARIANTS would
# never make it a variable, and one statement would split per state; a vendor's message catalogue lists such
# a message once (Cisco %LINEPROTO-5-UPDOWN, %BGP-5-ADJCHANGE).
_STATE_WORDS = frozenset(
    f"{w}{end}" for s in ("state", "status") for w in (s, s.capitalize(), s.upper()) for end in ("", ":", ",", "=")
)
_LOGGER_PREFIX = 3  # the first words of a line, where layouts print the logger
# A class named inside a message masks to this string: equal to WILDCARD, but its own object, so that _tokens can
# tell it (by identity, cheaply) from other variables in a line's first words, where it is the logger.
_CLASS_VALUE = "".join("<*>")
# A Java-style logger printed with its package (org.apache.hadoop.mapreduce.Job) or without it (Job, or a
# shorter package) is the same statement: compare such a token by its class name.
_QUALIFIED_CLASS = re.compile(r"^(?:[a-z_][\w]*\.)+([A-Z][\w$]*)(:?)$")


# A logger's note that it folded repeats of a line into this one is not part of the statement: Cisco NX-OS
# appends "(message repeated N times)" to the message (elastic/integrations' cisco_nexus pipeline test logs); the
# line is grouped as the message it repeats. rsyslog's "message repeated N times: [ <message>]" is another case:
# rsyslog writes a message of its own about the repeats (Loghub's OpenSSH labels it an event of its own, E14).
_REPEAT_SUFFIX = re.compile(r"\s+\(message repeated \d+ times?\)\s*$")


def unrepeated(text: str) -> str:
    """The line without a repeat note appended to it (see _REPEAT_SUFFIX)."""
    return _REPEAT_SUFFIX.sub("", text)


def _quoted_or_zone(tok: str) -> tuple[str, bool, bool] | None:
    """A word the line prints in quotes ('luke', "Default") is a value: the program quoted what it filled in. A
    time-zone abbreviation is part of a time ("at 07:40:12 PDT Tue May 9 2023"), as day and month names are."""
    core = tok.strip(",;.:")
    quoted = len(core) > 2 and core[0] == core[-1] and core[0] in "'\"" and core[0] not in core[1:-1]
    if quoted or core in _TIME_ZONES:
        return (tok.replace(core, WILDCARD, 1), True, True)
    return None


# Punctuation a quoted value may sit in ("('Default Web Access')," -> "(<*>),").
_SPAN_EDGE = "([{<,;:.)]}>"


def _closing(toks: list[str], i: int, q: str) -> int | None:
    """Where the quote `q` opened by toks[i] closes: the next token holding `q`, if it ends the token's word."""
    end = next((j for j in range(i + 1, len(toks)) if q in toks[j]), None)
    if end is None:
        return None
    tail = toks[end].rstrip(_SPAN_EDGE)
    return end if tail[-1:] == q and tail.count(q) == 1 else None


def _quoted_spans(toks: list[str]) -> list[str]:
    """Tokens with each quoted run of several words as one value: a program quotes what it fills in, and a
    filled-in name may hold spaces ("Applying policy 'Default Web Access' to session"). A run opens with a
    token that starts with a quote and does not close it, and ends where _closing says; otherwise (an
    apostrophe, a quote cut off) the tokens stay as they are."""
    out: list[str] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        head = tok.lstrip(_SPAN_EDGE)
        q = head[:1]
        end = _closing(toks, i, q) if q in ("'", '"') and len(head) > 1 and q not in head[1:] else None
        if end is None:
            out.append(tok)
            i += 1
            continue
        # One quoted word in place of the run, with the punctuation around it: _quoted_or_zone masks it.
        closer = toks[end]
        out.append(tok[: len(tok) - len(head)] + q + "_" + q + closer[len(closer.rstrip(_SPAN_EDGE)) :])
        i = end + 1
    return out


def _class_token(cls: re.Match[str]) -> tuple[str, bool, bool]:
    """A qualified Java name: a logger (followed by ':', as log4j's '%c: %m' prints it) is compared by its class
    name; a class named inside the message is a value ("Adding provider class org.x.y.SecurityFilter"); a
    constant (android.intent.action.SCREEN_OFF) is a word. _tokens reads the first words as a logger too."""
    name, colon = cls.group(1), cls.group(2)
    if colon or name.isupper():
        m = name + colon
        return (m, False, m.lower().strip(_EDGE) in _UNITS)
    return (_CLASS_VALUE, True, True)


def mask_token(tok: str) -> str:
    core = tok.strip(_EDGE)
    if core in _DATE_WORDS or (
        ("." in core or "/" in core or ":" in core or "@" in core) and _VAR_TOKEN.fullmatch(core)  # cheap first
    ):
        i = tok.find(core)
        return tok[:i] + WILDCARD + tok[i + len(core) :]
    return _MASK.sub(WILDCARD, tok)


def _classify_general(tok: str) -> tuple[str, bool, bool]:
    """A token as (masked, is a variable, joins a variable before it): the class-name rule, then mask_token,
    then quoted words and time zones. The definition; _classify gives the same answer faster for the common
    shapes."""
    shape = _classify_shape(tok)
    return shape if shape[1] else (_quoted_or_zone(tok) or shape)


def _classify_shape(tok: str) -> tuple[str, bool, bool]:
    if "." in tok:
        cls = _QUALIFIED_CLASS.match(tok)
        if cls:
            return _class_token(cls)
    m = mask_token(tok)
    var = WILDCARD in m and m.strip(_VAR_EDGE) == "*"
    # "2048 MB", "2034 bytes (1.98 KB)", "<*> <*>", "<*> ()": one variable with what follows it
    return (m, var, var or not m.strip(_EDGE) or m.lower().strip(_EDGE) in _UNITS)


def _classify(tok: str) -> tuple[str, bool, bool]:
    """_classify_general with fast paths for the common shapes (tests/test_log_templates.py checks that they
    agree on every distinct token of the Loghub samples). A log's distinct tokens are each classified once per
    grouper, and that is most of a short log's cost."""
    core = tok.strip(_EDGE)
    if core.isalpha():
        # A word with edge punctuation: no mask matches it (each needs a digit, or a UUID's hex and '-'), and
        # the class-name rule needs a '.' inside.
        if core in _DATE_WORDS:
            i = tok.find(core)
            return (tok[:i] + WILDCARD + tok[i + len(core) :], True, True)
        if core in _TIME_ZONES or (core != tok and ("'" in tok or '"' in tok)):
            return _or_value(tok, (tok, False, core.lower() in _UNITS))
        return (tok, False, core.lower() in _UNITS)
    if core.isascii() and (word := core.replace("_", "")).isalnum() and not word.isalpha():
        # One ASCII word of letters, digits and '_' holding a digit ("101052360", "hohuhu999", "(126)"): the
        # last mask takes it whole, unless it is a name ending in its only digit (eth1). No other mask can
        # match (they need '.', '-', '/' or ':' inside, or start with "0x" and also take the whole word).
        if core[:-1].isalpha() and core[-1].isdigit():
            return _or_value(tok, (tok, False, False))
        i = tok.find(core)
        return (tok[:i] + WILDCARD + tok[i + len(core) :], True, True)
    if "." in tok:
        cls = _QUALIFIED_CLASS.match(tok)
        if cls:
            return _or_value(tok, _class_token(cls))
    is_ascii = tok.isascii()
    if ("." in core or "/" in core or ":" in core or "@" in core) and (
        _VAR_TOKEN_ASCII if is_ascii else _VAR_TOKEN
    ).fullmatch(core):
        i = tok.find(core)
        m = tok[:i] + WILDCARD + tok[i + len(core) :]
    elif _MAY_MASK.search(tok) is None:
        # Every mask's match holds a digit or a UUID's first eight hex digits and '-': without them _MASK
        # leaves the token as it is (and _MASK is slow on long tokens: "-------", "key-exchange").
        m = tok
    else:
        m = (_MASK_ASCII if is_ascii else _MASK).sub(WILDCARD, tok)
    var = WILDCARD in m and m.strip(_VAR_EDGE) == "*"
    return _or_value(tok, (m, var, var or not m.strip(_EDGE) or m.lower().strip(_EDGE) in _UNITS))


def _or_value(tok: str, shape: tuple[str, bool, bool]) -> tuple[str, bool, bool]:
    """A word classified by its shape, unless it is quoted or a time zone (see _quoted_or_zone)."""
    if shape[1] or ("'" not in tok and '"' not in tok and not (tok[:1].isupper() and len(tok) < 7)):
        return shape  # no quote, and not capitalised and short like a time zone: _quoted_or_zone says no
    return _quoted_or_zone(tok) or shape


def mask(text: str) -> str:
    return " ".join(mask_token(t) for t in text.split())


def _const(tok: str) -> str:
    return "" if WILDCARD in tok else tok


def _is_var(tok: str) -> bool:
    return WILDCARD in tok and tok.strip(_VAR_EDGE) == "*"


_VAR_EDGE = _EDGE + "<>="


_HAS_DIGIT = re.compile(r"\d").search


def _key_word(tok: str) -> str:
    """A token as an index key: nothing for a variable; a `key=value` by its key (the value may vary)."""
    if WILDCARD in tok:
        return ""
    # A word holding a digit is no key either ("GigabitEthernet2," and "<*>," for GigabitEthernet10 are one
    # interface position): drain3 sends such tokens to its wildcard branch too (parametrize_numeric_tokens,
    # drain3 0.9.11 drain.py). The match below then compares them (see _indexed_name).
    if not tok.isalpha() and _HAS_DIGIT(tok):
        return ""
    k, eq, _ = tok.partition("=")
    return k + eq


def _indexed_name(a: str, b: str) -> bool:
    """One name with two indexes (eth0 / eth2, GigabitEthernet2 / GigabitEthernet3, vty0 / vty3): the same
    letters, then digits, with the same punctuation around. A name that ends in a single digit is a word of the
    statement by itself (see _MASKS: SOCKS5), so an index differing at one position is read here. Not for
    versions and kinds: an acronym or a 'v' after one (IPV4 / IPV6, SOCKS4 / SOCKS5, IPv4 / IPv6)."""
    ca, cb = a.strip(_EDGE), b.strip(_EDGE)
    if not (ca[-1:].isdigit() and cb[-1:].isdigit()):
        return False
    stem = ca.rstrip("0123456789")
    return (
        stem == cb.rstrip("0123456789")
        and stem[-1:].isalpha()
        and not stem.isupper()
        and not (stem[-1] == "v" and stem[:-1].isupper())
        and a.replace(ca, "") == b.replace(cb, "")
    )


def _plural_pair(a: str, b: str) -> bool:
    """One noun, singular and plural (packet / packets, entry / entries)."""
    if a + "s" == b or b + "s" == a:
        return True
    return (a[-1:] == "y" and a[:-1] + "ies" == b) or (b[-1:] == "y" and b[:-1] + "ies" == a)


def _named_value(tpl: list[str], i: int, a: str, b: str) -> bool:
    """Two constant words at position i are values of one variable when the statement names it there:
    `key=alice` / `key=bob` (same key), the word after an account word (`user alice` / `user bob`), one name
    with two indexes (`eth0` / `eth2`), a count's noun (`1 packet` / `2 packets`), or a word within four after a
    state word (`state from Down to Up`)."""
    if "=" in a:
        ka = a.partition("=")[0]
        kb, _, vb = b.partition("=")
        return ka == kb and (vb != "" or b.endswith("=")) and ka != ""
    if i and tpl[i - 1] in _ACCOUNT_WORDS:
        return True
    if _indexed_name(a, b):
        return True
    if i and WILDCARD in tpl[i - 1] and _plural_pair(a.strip(_EDGE), b.strip(_EDGE)):
        return True  # a count's noun, singular or plural ("1 packet" / "32 packets")
    return not _STATE_WORDS.isdisjoint(tpl[max(0, i - 4) : i])


# A line cut inside its last word (a paste, or a collector that truncates long lines) keeps at least this many of
# its characters: a long word (a URL, a path) cut short, not two short words that begin alike (cu / cuda).
_CUT_MIN = 12


def _cut(a: str, b: str) -> bool:
    """Two last words of one event, one cut short: the shorter, of _CUT_MIN characters or more, begins the other."""
    short, whole = (a, b) if len(a) < len(b) else (b, a)
    return len(short) >= _CUT_MIN and whole.startswith(short)


def _differ(a: list[str], b: list[str]) -> compress[int]:
    """The positions where two token lists differ (up to the shorter's length). The comparison runs in C: most
    positions agree, and a Python loop over every position is most of the cost of comparing a line with a
    template."""
    return compress(count(), map(ne, a, b))


def _anchors(tokens: list[str], skip: int) -> int:
    """Constant words of a template other than position `skip` (the evidence that two lines are one event)."""
    return sum(1 for i, t in enumerate(tokens) if i != skip and WILDCARD not in t)


class TemplateMiner:
    """Online grouping: `add(line)` returns a group id; `group(gid)` the id it ended up in (groups that turn
    out to be variants of one event are merged later); `template(gid)` that group's template."""

    def __init__(self, similarity: float = 0.5) -> None:
        self.similarity = similarity
        self._templates: list[list[str]] = []
        self._parent: list[int] = []
        self._index: dict[tuple[int, str, str], list[int]] = {}
        self._exact: dict[str, int] = {}
        self._tok_cache: dict[str, tuple[str, bool, bool]] = {}
        # Where to look when the (length, first words) bucket has no match: groups by everything but their
        # first word (a variable subject, "<*> startup succeeded"), and by their first and by their last
        # constant word whatever their length (a variable that spans a different number of tokens).
        self._by_rest: dict[tuple[int, str], list[int]] = {}
        self._by_end: dict[tuple[str, str], list[int]] = {}
        # Groups joined to another as its rarer, longer shape (see _extends): leaf -> lines seen so far.
        self._tentative: dict[int, int] = {}

    def _tokens(self, text: str) -> list[str]:
        """Tokens with variables masked; per-token cache, since most tokens repeat. A variable swallows the
        tokens that continue it ("2048 MB", "<*> <*>", "<*> ()"): see _classify."""
        cache = self._tok_cache
        out: list[str] = []
        prev_var = False
        if "(message repeated" in text:
            text = unrepeated(text)
        toks = text.split()
        if "'" in text or '"' in text:
            toks = _quoted_spans(toks)
        for tok in toks:
            hit = cache.get(tok)
            if hit is None:
                hit = _classify(tok)
                if len(cache) < 200_000:
                    cache[tok] = hit
            if hit[0] is _CLASS_VALUE and len(out) < _LOGGER_PREFIX:
                # A layout prints the logger in the line's first words ('%d %-5p %c - %m'), with or without a
                # colon: there it is the logger, compared by its class name.
                cls = _QUALIFIED_CLASS.match(tok)
                if cls:
                    hit = (cls.group(1), False, False)
            if prev_var and hit[2]:
                continue
            out.append(hit[0])
            prev_var = hit[1]
        return out

    def group(self, gid: int) -> int:
        while self._parent[gid] != gid:
            self._parent[gid] = gid = self._parent[self._parent[gid]]
        return gid

    def add(self, text: str) -> int:
        tokens = self._tokens(text)
        masked = " ".join(tokens)
        hit = self._exact.get(masked)
        if hit is not None:
            if self._tentative:
                self._recur(hit)
            return hit
        # Like Drain's prefix tree: length and the first two constant-looking tokens must agree.
        n_tok = len(tokens)
        key0 = _key_word(tokens[0]) if tokens else ""
        # After an account word the second word is a value ("User alice has exited"): no key.
        key1 = _key_word(tokens[1]) if n_tok > 1 and tokens[0] not in _ACCOUNT_WORDS else ""
        key = (n_tok, key0, key1)
        bucket = self._index.setdefault(key, [])
        best, best_score = self._best(bucket, tokens)
        if best < 0 and key1:
            # A statement whose second word was a variable so far ("Received (<*>, <*>) Join") takes this line
            # with a word there ("Received (*, <*>) Join"): drain3 sends such a line down its wildcard branch.
            other = [g for g in self._index.get((n_tok, key0, ""), ()) if _is_var(self._templates[g][1])]
            if other:
                best, best_score = self._best(other, tokens)
        if best >= 0 and best_score >= self.similarity:
            tpl = self._templates[best]
            self._templates[best] = [a if a == b else WILDCARD for a, b in zip(tpl, tokens, strict=False)]
            gid = best
        else:
            gid = len(self._templates)
            self._templates.append(tokens)
            self._parent.append(gid)
            bucket.append(gid)
            # _note_variant merges only when VARIANTS groups of this bucket differ at one position.
            if len(bucket) >= VARIANTS:
                self._note_variant(key, gid)
            tpl = self._templates[gid]  # a new list if _note_variant merged others into it
            self._join_elsewhere(gid, masked if tpl is tokens else " ".join(tpl))
        self._exact[masked] = gid
        if self._tentative:
            self._recur(gid)
        return gid

    def _best(self, bucket: list[int], tokens: list[str]) -> tuple[int, float]:
        best, best_score = -1, -1.0
        n = len(tokens) or 1
        last = len(tokens) - 1
        templates = self._templates
        for gid in bucket:
            tpl = templates[gid]
            same = len(tokens)  # positions that agree or where the template has a variable
            for i in _differ(tpl, tokens):  # one length (the bucket key)
                a = tpl[i]
                if a == WILDCARD:
                    continue
                same -= 1
                b = tokens[i]
                if WILDCARD not in a and WILDCARD not in b and not _named_value(tpl, i, a, b):
                    if i == last and _cut(a, b):
                        continue  # the line was cut inside its last word: the same event (see _cut)
                    break  # a word differs: another event, unless many groups differ there (see _note_variant)
            else:
                score = same / n
                if score > best_score:
                    best, best_score = gid, score
        return best, best_score

    def _recur(self, gid: int) -> None:
        """A group joined as another's rarer shape stands on its own once a second line of it comes."""
        seen = self._tentative.get(gid)
        if seen is None:
            return
        if seen >= 1:
            del self._tentative[gid]
            self._parent[gid] = gid
        else:
            self._tentative[gid] = seen + 1

    def _join_elsewhere(self, gid: int, masked: str) -> None:
        """A new group that no same-shape group took: one event all the same when
        - only its first word differs from VARIANTS groups' and at least two constant words follow: a statement
          that starts with its subject ("sshd startup succeeded" / "crond startup succeeded");
        - it differs from a group of another length only inside one stretch that touches a variable of either,
          with at least two constant words around it: that variable spans a different number of tokens
          ("Error: command found" / "Error: Unrecognized command found" after a variable echo)."""
        tokens = self._templates[gid]
        n = len(tokens)
        rest = (n, masked[len(tokens[0]) + 1 :] if tokens else "")  # the template but its first word
        same_rest = self._by_rest.setdefault(rest, [])
        roots = (
            list(dict.fromkeys(r for r in (self.group(o) for o in same_rest) if len(self._templates[r]) == n))
            if same_rest and n > 1 and _const(tokens[0]) and _anchors(tokens, 0) >= 2
            else []
        )
        if roots:
            root = roots[0]
            # A subject seen in VARIANTS statements that are otherwise equal is a variable (daemon names);
            # fewer are different events (Acquiring / Releasing a lock). Once it is one, any subject joins.
            if self._templates[root][0] == WILDCARD or len(roots) + 1 >= VARIANTS:
                for other in [*roots[1:], gid]:
                    self._parent[other] = root
                self._templates[root][0] = WILDCARD
                same_rest.append(gid)
                return
        same_rest.append(gid)
        ends = []
        if tokens and WILDCARD not in tokens[0]:
            ends.append(("^", tokens[0]))
        if tokens and WILDCARD not in tokens[-1]:
            ends.append(("$", tokens[-1]))
        templates, parent, by_end = self._templates, self._parent, self._by_end
        for end in ends:
            for cand in by_end.get(end, ()):
                root = cand if parent[cand] == cand else self.group(cand)
                tpl = templates[root]
                if root == gid or not 0 < abs(len(tpl) - n) <= 8:
                    continue
                # _spans rejects at once two different words at the first differing position; where that
                # position is plain (1 when only the first words agree, 0 when the first words differ) the
                # check runs here, without the call: most candidates of a new group end there.
                at = 1 if tpl[0] == tokens[0] else 0
                if at < len(tpl) and at < n and (at == 0 or tpl[1] != tokens[1]):
                    a, b = tpl[at], tokens[at]
                    if WILDCARD not in a and WILDCARD not in b:
                        continue
                # The same at the last position, when the last words differ (and the shorter side is not the
                # start of the longer, where _spans has no last differing position to test).
                a, b = tpl[-1], tokens[-1]
                if a != b and WILDCARD not in a and WILDCARD not in b:
                    short = min(len(tpl), n)
                    if tpl[:short] != tokens[:short]:
                        continue
                if self._spans(tpl, tokens):
                    self._parent[gid] = root
                    return
        for end in ends[:1]:
            for cand in by_end.get(end, ()):
                root = cand if parent[cand] == cand else self.group(cand)
                tpl = templates[root]
                # A statement seen before: its one-off longer shape joins it (_extends); a second line of that
                # shape makes it a statement of its own (_recur). The line is longer and agrees with the
                # template at both ends, or starts with all of it (checked before the call).
                if (
                    root != gid
                    and n > len(tpl)
                    and (tpl[-1] == tokens[-1] or tokens[: len(tpl)] == tpl)
                    and self._extends(tpl, tokens)
                ):
                    self._parent[gid] = root
                    self._tentative[gid] = 0
                    return
        for end in ends:
            group = by_end.setdefault(end, [])
            if len(group) < 8:  # a bounded look-up: the shapes seen first are the common ones
                group.append(gid)

    @staticmethod
    def _spans(tpl: list[str], tokens: list[str]) -> bool:
        if len(tpl) == len(tokens) or abs(len(tpl) - len(tokens)) > 8:  # a spanning variable: <= 8 tokens more
            return False
        short = min(len(tpl), len(tokens))
        # The agreeing start and end (a template variable ends them: it may be the one that spans). Plain loops:
        # they are short (a line that agrees at length is in the template's group already).
        lo = 0
        while lo < short and tpl[lo] == tokens[lo]:
            lo += 1
        # The longer side's differing stretch holds position lo, and so does the shorter's unless it is empty:
        # two different words there fail the test below at once (and at the last differing position alike).
        if lo < short and WILDCARD not in tpl[lo] and WILDCARD not in tokens[lo]:
            return False
        hi = 0
        while hi < short - lo and tpl[-1 - hi] == tokens[-1 - hi]:
            hi += 1
        if hi < short - lo and WILDCARD not in tpl[-1 - hi] and WILDCARD not in tokens[-1 - hi]:
            return False
        gap_t, gap_l = tpl[lo : len(tpl) - hi], tokens[lo : len(tokens) - hi]
        # One side's differing stretch must be variables only (the variable that spans more, or fewer,
        # tokens on the other side), and the agreeing parts must hold at least two constant words: a stretch
        # of differing words on both sides is another statement.
        # The other side's stretch is the value's words: a variable of its own there ("invalid user <*>")
        # makes it another statement.
        if len(gap_t) > 8 or len(gap_l) > 8:
            return False
        vars_t = vars_l = 0  # loops, not generators: this runs for every candidate of a new group
        for t in gap_t:
            if WILDCARD in t:
                vars_t += 1
        for t in gap_l:
            if WILDCARD in t:
                vars_l += 1
        if not ((gap_t and vars_t == len(gap_t) and not vars_l) or (gap_l and vars_l == len(gap_l) and not vars_t)):
            return False
        kept = tpl[:lo] + tpl[len(tpl) - hi :]
        return _anchors(kept, -1) >= 2

    @staticmethod
    def _extends(tpl: list[str], tokens: list[str]) -> bool:
        """The line is the template with a few words more in one place ("changed state to administratively
        down" / "... down from <*>"): an optional clause, printed rarely. It joins the template's group, but
        only while it is rare (see _recur): a second line of that shape makes it a statement of its own, as
        "Connection closed by <*>" and "Connection closed by <*> [preauth]" are. The added words must be fewer
        than the template's constant words, so a short template does not swallow longer statements."""
        lo = next(_differ(tpl, tokens), len(tpl))  # the line is the longer
        hi = min(next(_differ(tpl[::-1], tokens[::-1]), len(tpl)), len(tpl) - lo)
        if lo + hi < len(tpl):
            return False
        anchors = _anchors(tpl, -1)
        return anchors >= 2 and len(tokens) - len(tpl) < anchors

    def _note_variant(self, key: tuple[int, str, str], gid: int) -> int:
        """A word that takes many values at one position of otherwise equal lines is a variable (a user name
        the line does not name as such); a few values are different events (Started / Stopped). Merge once
        VARIANTS groups differ there, with MIN_ANCHORS constant words besides."""
        tpl = self._templates[gid]
        at: dict[int, list[int]] = {}
        for other in self._index[key]:
            if other == gid:
                continue
            pos = -1
            tpl_o = self._templates[other]
            for i in _differ(tpl, tpl_o):  # one length (the key)
                a, b = tpl[i], tpl_o[i]
                if a == WILDCARD or b == WILDCARD:
                    continue
                if _const(a) and _const(b) and _named_value(tpl, i, a, b):
                    continue  # a value the statement names: not what tells these groups apart
                if pos >= 0 or not (_const(a) and _const(b)):
                    break
                pos = i
            else:
                if pos >= 0:
                    at.setdefault(pos, []).append(other)
        for pos, group in at.items():
            if len(group) + 1 >= VARIANTS and _anchors(tpl, pos) >= MIN_ANCHORS:
                for other in group:
                    self._parent[other] = gid
                    self._templates[gid] = [
                        x if x == y else WILDCARD
                        for x, y in zip(self._templates[gid], self._templates[other], strict=True)
                    ]
                    self._index[key].remove(other)
                break
        return gid

    def template(self, gid: int) -> str:
        return " ".join(self._templates[self.group(gid)])

    def __len__(self) -> int:
        return sum(1 for i, p in enumerate(self._parent) if i == p)
