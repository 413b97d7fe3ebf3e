"""The configuration as deployed: what it would do at start-up with nothing changed to make it fit (the
self-check after a deploy and the analyzers' bounds use it, where the planner proper suggests changes)."""

from __future__ import annotations

from skills.capacity.catalog import Catalog, load_catalog
from skills.capacity.estimates import cold_start_estimate_s
from skills.capacity.fit import (
    compute_memory,
    largest_len,
    resolve_request,
)
from skills.capacity.fit_types import GIB, DeployedCheck, FitRequest, StartFailure


def check_as_deployed(req: FitRequest, catalog: Catalog | None = None) -> DeployedCheck:
    """The configuration as given (defaults resolved, nothing changed to make it fit)."""
    cat = catalog or load_catalog()
    m, g = cat.model(req.model), cat.gpu(req.gpu)
    eff, _, _ = resolve_request(cat, m, g, req)
    c = compute_memory(cat, m, g, eff)
    mml = eff.max_model_len or m.default_max_model_len
    failure: StartFailure | None = None
    if c.host_short or c.host_impossible:
        failure = "host_memory"
    elif c.budget_gib - c.weights_gpu_gib - c.overhead_gib <= 0:
        failure = "gpu_oom_at_load"
    elif c.kv_tokens < mml:
        failure = "kv_cache_insufficient"
    elif c.warmup_short:
        failure = "graph_warmup_oom"
    return DeployedCheck(
        failure=failure,
        weights_gib=round(c.weights_gib, 2),
        gpu_memory_gib=g.memory_gib,
        budget_gib=round(c.budget_gib, 2),
        kv_free_gib=round(c.kv_free_gib, 2),
        kv_needed_gib=round(c.bpt * mml / GIB, 2),
        kv_tokens=c.kv_tokens,
        kv_blocks=c.kv.num_blocks if c.kv is not None else 0,
        max_len_that_fits=largest_len(cat, m, g, eff),
        graph_warmup_gib=m.graph_warmup_gib,
        host_need_gib=round(c.host_need_gib, 1),
        cold_start_s=cold_start_estimate_s(cat, m, eff),
        load_s=round(cat.load_s(m)),
    )
