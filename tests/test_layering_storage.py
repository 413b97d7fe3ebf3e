"""handlers/ decide, render and call Slack; storage lives in skills/ (issue 18). No handler module calls a Redis
command: not by an unmistakable command name (hset, zadd, xadd, pipeline, ...) on anything, and not by any name
(get, set, delete, exists, ...) on a Redis client (`deps.redis`, `self.r`, `redis`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Names that are Redis commands whatever they are called on (redis-py's client and pipeline methods).
REDIS_COMMANDS = frozenset(
    """
    blmove blpop brpop decr decrby eval evalsha expire expireat getdel getex getset hdel hexists hget
    hgetall hincrby hkeys hlen hmget hmset hscan hset hsetnx hvals incr incrby incrbyfloat linsert llen lmove
    lpop lpush lrange lrem lset ltrim mget mset msetnx persist pexpire pipeline psetex pttl publish rename
    rpop rpush sadd scan scan_iter scard sismember smembers spop srem sscan setex setnx unlink watch xack xadd
    xautoclaim xclaim xdel xgroup_create xinfo_stream xlen xpending xpending_range xrange xread xreadgroup
    xrevrange xtrim zadd zcard zcount zincrby zrange zrangebyscore zrank zrem zremrangebyscore zrevrange
    zrevrangebyscore zscore register_script
    """.split()
)


def _client(node: ast.expr) -> bool:
    """A Redis client as this code base names one (`deps.redis`, `redis`, `self.r`): any method call on it is
    a Redis command."""
    if isinstance(node, ast.Attribute):
        return node.attr == "redis" or (
            node.attr == "r" and isinstance(node.value, ast.Name) and node.value.id == "self"
        )
    return isinstance(node, ast.Name) and node.id == "redis"


def redis_calls(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        if name in REDIS_COMMANDS or _client(node.func.value):
            found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno}: .{name}(...)"))
    return [text for _, text in sorted(found)]


def test_the_checker_sees_redis_calls(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    src = "async def f(self, deps, p, d, r):\n    await deps.redis.get('k')\n    p.zadd('z', {})\n    d.get('k')\n"
    probe.write_text(src + "    await self.r.delete('k')\n    r.add('x')\n")
    assert [c.split(": ", 1)[1] for c in redis_calls(probe, tmp_path)] == [".get(...)", ".zadd(...)", ".delete(...)"]


def test_handlers_make_no_redis_calls() -> None:
    calls = [c for p in sorted((ROOT / "handlers").rglob("*.py")) for c in redis_calls(p)]
    assert calls == [], "Redis commands in handlers/ (move them into a store in skills/):\n" + "\n".join(calls)
