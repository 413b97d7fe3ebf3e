"""The log grouper on variables that are not whitespace-separated tokens (skills/logs/templates.py).

Generalisation is measured by bench/log_grouping.py on Loghub systems kept out of the repository; these tests
pin the shapes one by one so that a change to the masks shows which shape it broke.
"""

from __future__ import annotations

from skills.logs.templates import TemplateMiner, mask


def _groups(lines: list[str]) -> list[int]:
    miner = TemplateMiner()
    gids = [miner.add(line) for line in lines]
    return [miner.group(g) for g in gids]


def test_host_port_and_host_names_are_variables() -> None:
    g = _groups(
        [
            "proxy.cse.cuhk.edu.hk:5070 open through proxy proxy.cse.cuhk.edu.hk:5070 HTTPS",
            "clients4.google.com:443 open through proxy proxy.cse.cuhk.edu.hk:5070 HTTPS",
            "short.weixin.qq.com:80 open through proxy 10.0.0.1:5070 HTTPS",
            "short.weixin.qq.com:80 open through proxy 10.0.0.1:5070 SOCKS5",
        ]
    )
    assert g[0] == g[1] == g[2]
    assert g[3] != g[0]  # a protocol name is not a variable


def test_process_name_before_a_separator() -> None:
    assert mask("sshd[1234]: Accepted password") == "sshd[<*>]: Accepted password"
    g = _groups(["com.apple.cache.daily: told me to run", "com.apple.icloud.fmfd.heartbeat: told me to run"])
    assert g[0] == g[1]


def test_paths_and_mixed_ids() -> None:
    assert mask("Removable base files: /var/lib/nova/instances/_base/a489c868") == "Removable base files: <*>"
    assert mask("node node-12 via jA9J1dQ7016560: blk_-1608999687919862906") == "node <*> via <*>: <*>"
    g = _groups(["deleting /tmp/a/b now", "deleting /srv/x/y/z.log now"])
    assert g[0] == g[1]


def test_numbers_with_units_and_annotations_are_one_variable() -> None:
    g = _groups(
        [
            "host.example.com:80 close, 2034 bytes (1.98 KB) sent, 4206 bytes (4.10 KB) received, lifetime 00:39",
            "host.example.com:80 close, 785 bytes sent, 145 bytes received, lifetime <1 sec",
        ]
    )
    assert g[0] == g[1]


def test_key_value_words_merge_only_when_many_values_appear() -> None:
    users = ["root", "uucp", "ftp", "git", "guest", "admin"]
    lines = [f"authentication failure; logname= uid=0 tty=ssh rhost=10.0.0.{i} user={u}" for i, u in enumerate(users)]
    assert len(set(_groups(lines))) == 1
    states = ["Started", "Stopped", "Paused", "Resumed"]
    lines = [f"[instance: 70c1714b-c11b-4c88-b300-239afe1f5ff8] VM {s} (Lifecycle Event)" for s in states * 3]
    assert len(set(_groups(lines))) == 4


def test_template_of_a_merged_group_has_the_wildcard() -> None:
    miner = TemplateMiner()
    gids = [miner.add(f"session closed for user {u} on tty1") for u in ["a", "b", "c", "d", "e"]]
    assert len({miner.group(g) for g in gids}) == 1
    assert miner.template(gids[0]) == "session closed for user <*> on tty1"


# Issue 32: the weakness classes seen on systems outside Loghub, each with lines of its own.


def test_a_variable_spanning_more_tokens_stays_in_its_group() -> None:
    g = _groups(
        [
            "Downloading weights from /models/gemma/7b to cache dir",
            "Downloading weights from /models/llama/8b to cache dir",
            "Downloading weights from My Models/llama to cache dir",  # the same variable, two tokens here
            "Downloading weights from Shared Team Models/x to cache dir",  # three
        ]
    )
    assert len(set(g)) == 1
    # A different stretch of constant words on both sides is another statement.
    assert _groups(["Copying weights from a to cache dir", "Downloading weights from b to cache dir"]) != [0, 0]


def test_a_variable_first_word_merges_once_it_takes_many_values() -> None:
    daemons = ["sshd", "crond", "atd", "cupsd", "xinetd", "ntpd"]
    g = _groups([f"{d} startup succeeded" for d in daemons])
    assert len(set(g)) == 1
    # Two leading verbs are two events (acquire / release), not a variable.
    g = _groups(['Acquiring suspend blocker "WakeLocks".', 'Releasing suspend blocker "WakeLocks".'] * 3)
    assert len(set(g)) == 2


def test_user_names_merge_at_once_where_the_line_names_them() -> None:
    g = _groups(["session opened for user alice by cron", "session opened for user bob by cron"])
    assert g[0] == g[1]
    g = _groups(["auth failure; rhost=10.0.0.1 user=alice", "auth failure; rhost=10.0.0.2 user=bob"])
    assert g[0] == g[1]
    g = _groups(["Password for alice@CORP.EXAMPLE:", "Password for USER0:"])
    assert g[0] == g[1]


def test_echoed_commands_that_differ_in_one_word_stay_apart() -> None:
    # The header is all variables (time, session, address), so the command is most of what the line says.
    commands = ["display version", "display license", "display clock", "display device", "display startup", "quit"]
    lines = [f"[2024-05-0{i % 9 + 1} 10:00:0{i}.1] {{CLI}}[10.0.0.{i} 2{i}]: {c}" for i, c in enumerate(commands * 2)]
    g = _groups(lines)
    assert len(set(g)) == len(commands)


def test_a_logger_with_or_without_its_package_is_one_statement() -> None:
    g = _groups(
        [
            "INFO org.apache.hadoop.mapreduce.Job: Running job: job_1668496639954_6827",
            "INFO mapreduce.Job: Running job: job_1668496639954_6828",
            "INFO Job: Running job: job_1668496639954_6829",
        ]
    )
    assert len(set(g)) == 1


def test_a_named_value_that_is_empty_or_a_path_is_one_variable() -> None:
    g = _groups(["patching args=", "patching args=/usr/local/bin/run", "patching args=--fast"])
    assert len(set(g)) == 1


def test_the_words_a_state_word_names_are_values() -> None:
    # One message of a vendor's catalogue (Cisco %LINEPROTO-5-UPDOWN, %BFD-5-STATE_CHANGE) per state change.
    g = _groups(
        [
            "Line protocol on Interface Ethernet28, changed state to down",
            "Line protocol on Interface Ethernet28, changed state to up",
        ]
    )
    assert g[0] == g[1]
    g = _groups(
        [
            "peer 192.0.2.2 changed state from Down to Up diag None",
            "peer 192.0.2.2 changed state from Init to Up diag None",
            "peer 192.0.2.2 changed state from Up to Down diag None",
        ]
    )
    assert len(set(g)) == 1
    # Without a state word, a differing word is still another event.
    g = _groups(
        [
            "Line protocol on Interface Ethernet28, changed to down",
            "Line protocol on Interface Ethernet28, changed to up",
        ]
    )
    assert g[0] != g[1]


def test_a_one_off_longer_shape_of_a_statement_joins_it() -> None:
    base = "Interface GigabitEthernet2, changed state to administratively down"
    g = _groups([base, base, base + " from 10.83.75.201", base])
    assert len(set(g)) == 1
    # Seen twice, the longer shape is a statement of its own ("Connection closed by <*> [preauth]").
    g = _groups([base, base, base + " from 10.83.75.201", base, base + " from 10.83.75.202"])
    assert g[0] == g[1] == g[3] and g[2] == g[4] and g[0] != g[2]
    # A statement seen once takes it too (IOS: "administratively down" once, then "... down from <*>").
    g = _groups([base, base + " from 10.83.75.201"])
    assert g[0] == g[1]
    # The added words must be fewer than the statement's own constant words: a short one swallows nothing.
    g = _groups(["PCI: Probing PCI hardware", "PCI: Probing PCI hardware (bus 00) and bridges"])
    assert g[0] != g[1]


# Shapes at the edges of _classify's fast paths: names ending in one digit, hex, dates with a word after them,
# UUIDs (of hex letters only too), edge punctuation, units, Unicode digits and letters, a literal wildcard.
_EDGE_TOKENS = (
    "eth1 eth12 a1 A1 _1 1_ a_1 _ 0x1f 0x1g (0x1f) 11-20 11-20-abc 2021-01-01 15:00:13.192] (123) 123. .123 "
    "1.2.3.4.5 1.2.3.4:80 1.2:80 deadbeef-dead-beef-dead-beefdeadbeef 12345678-1234-1234-1234-123456789012-5 "
    "DEADBEEF- abcdefab-x Mon, Mon. (Mon) org.apache.Foo: org.apache.Foo 2048MB MB mb, (sec) sec <1 [1] "
    "user=1 key= = ip:1 <*> <*>, -------- a-b-c-d-e ١٢٣ x² ü1 Ü é na\u00efve"
).split()


def _corpus() -> list[str]:
    """Every distinct token of the Loghub samples in the repository, and the edge shapes above."""
    import csv
    from pathlib import Path

    tokens: dict[str, None] = dict.fromkeys(_EDGE_TOKENS)
    for path in sorted((Path(__file__).parent / "data" / "loghub").glob("*/*_structured.csv")):
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            for row in csv.DictReader(fh):
                tokens.update(dict.fromkeys(row["Content"].split()))
    return list(tokens)


def test_the_fast_classification_agrees_with_the_definition() -> None:
    """_classify's shortcuts (plain words, words holding a digit, tokens no mask can match, ASCII-mode
    patterns, masks that skip the inside of words) give what the general rule gives, token by token."""
    import re

    from skills.logs import templates as t

    corpus = _corpus()
    assert len(corpus) > 5000
    assert [t._classify(tok) for tok in corpus] == [t._classify_general(tok) for tok in corpus]
    plain_masks = re.compile("|".join(f"(?:{rx})" for rx in t._MASKS))  # the masks as written, one after another
    assert [t._MASK.sub("<*>", tok) for tok in corpus] == [plain_masks.sub("<*>", tok) for tok in corpus]


def test_a_repeat_note_appended_by_the_logger_is_not_part_of_the_statement() -> None:
    # NX-OS appends "(message repeated N time(s))" to the line it folded repeats into.
    g = _groups(
        [
            "Duplex mismatch discovered on Ethernet1/47, with FastEthernet0/24",
            "Duplex mismatch discovered on Ethernet1/12, with FastEthernet0/3 (message repeated 7 times)",
            "Problem during name-lookup. Error:-3(temporary failure in name resolution) (message repeated 1 time)",
        ]
    )
    assert g[0] == g[1] != g[2]
    # rsyslog's "message repeated N times: [ ... ]" is a message of rsyslog's own (an event of its own in Loghub).
    g = _groups(
        [
            "Failed password for root from 5.36.59.76 port 42393 ssh2",
            "message repeated 5 times: [ Failed password for root from 5.36.59.76 port 42393 ssh2]",
        ]
    )
    assert g[0] != g[1]


def test_one_name_with_two_indexes_is_one_position_but_versions_are_not() -> None:
    g = _groups(
        [
            "Interface GigabitEthernet2, changed state to down",
            "Interface GigabitEthernet10, changed state to up",  # masked: '<*>,' (two digits)
            "Interface GigabitEthernet3, changed state to down",
            "eth1: link is up at 1000 Mbps",
            "eth2: link is up at 1000 Mbps",
        ]
    )
    assert g[0] == g[1] == g[2] and g[3] == g[4] != g[0]
    # Acronyms with a digit name a version or a kind.
    g = _groups(["wl0: MDNS: IPV4 Addr: 10.105.160.95", "wl0: MDNS: IPV6 Addr: 2607:f140:6000:8:c6b3:1ff:fecd:467f"])
    assert g[0] != g[1]


def test_a_class_named_inside_the_message_is_a_value_but_a_logger_is_compared_by_class_name() -> None:
    app = "from Application class org.keycloak.services.resources.KeycloakApplication"
    g = _groups(
        [
            f"Adding singleton resource org.keycloak.services.resources.RobotsResource {app}",
            f"Adding singleton resource org.keycloak.services.resources.RealmsResource {app}",
            f"Adding provider class org.keycloak.services.error.KeycloakErrorHandler {app}",
        ]
    )
    assert g[0] == g[1] != g[2]
    # In the line's first words a qualified name is the logger, printed with its package or not.
    g = _groups(
        [
            "SparkContext - Running Spark version 1.6.0",
            "org.apache.spark.SparkContext - Running Spark version 1.6.0",
            "Executor - Running Spark version 1.6.0",
        ]
    )
    assert g[0] == g[1] != g[2]
    # A constant is a word of the statement (android.intent.action.SCREEN_ON / SCREEN_OFF are two events).
    action = "onReceive action: android.intent.action.SCREEN_"
    g = _groups([action + "ON", action + "OFF"])
    assert g[0] != g[1]


def test_quoted_words_time_zones_and_counted_nouns_are_values() -> None:
    g = _groups(
        [
            "User 'luke' is performing a 'rollback'",
            "User 'admin' is performing a 'commit'",
            "Login Success [user: admin] [localport: 22] at 07:40:12 PDT Tue May 9 2023",
            "Login Success [user: admin] [localport: 22] at 12:00:59 UTC Wed Jun 14 2023",
            "list 150 denied icmp 192.168.100.12 -> 192.168.100.1 (3/3), 32 packets",
            "list 151 denied icmp 192.168.100.1 -> 192.168.100.2 (3/4), 1 packet",
        ]
    )
    assert g[0] == g[1] and g[2] == g[3] and g[4] == g[5] and len({g[0], g[2], g[4]}) == 3


def test_a_quoted_value_of_several_words_is_one_value() -> None:
    # A program quotes the name it fills in, and a name may hold spaces: the quoted run is one value whatever
    # its word count (F5 APM "Following rule '...' from item '...'" prints access-policy names this way).
    g = _groups(
        [
            "Applying policy 'Default Web Access' to session of group \"Remote Staff EU\", result 'allow'",
            "Applying policy 'vpn' to session of group \"ops\", result 'allow'",
            "Applying policy 'Contractors (no VPN)' to session of group \"Guests\", result 'deny'",
        ]
    )
    assert g[0] == g[1] == g[2]
    # A quote that is never closed is an apostrophe or a cut-off value, not a run: the words stay words.
    g = _groups(["the 'quick fix was applied to node", "the 'slow fix was applied to node"])
    assert g[0] != g[1]


def test_a_value_after_an_account_word_or_a_variable_second_word_does_not_split_the_bucket() -> None:
    g = _groups(
        [
            "User john.smith has exited tty session 5(10.5.36.9)",
            "User CPI has exited tty session 1(192.168.0.1)",
            "Flushed 12 routes from table main after 30 seconds",
            "Flushed all routes from table main after 30 seconds",
            "Flushed stale routes from table main after 30 seconds",
        ]
    )
    assert g[0] == g[1] != g[2] and g[2] == g[3] == g[4]
    # Two words there, with no variable seen at that place, are two statements.
    g = _groups(["Flushed all routes from table main", "Flushed stale routes from table main"])
    assert g[0] != g[1]


def test_groups_that_differ_in_a_named_value_and_one_word_become_one_statement_at_variants() -> None:
    # Five BGP state changes with five event names: the states are named values, the event word is the variable.
    events = [
        ("Active", "Connect", "TransportError"),
        ("Active", "Idle", "Stop"),
        ("Connect", "OpenSent", "Open"),
        ("Established", "Idle", "HoldTime"),
        ("Idle", "Connect", "Start"),
    ]
    lines = [
        f"BGP peer 1.1.1.1 (External AS 2222) changed state from {a} to {b} (event {e}) (instance master)"
        for a, b, e in events
    ]
    assert len(set(_groups(lines))) == 1
    assert len(set(_groups(lines[:2]))) == 2  # two event names are two events until VARIANTS agree
