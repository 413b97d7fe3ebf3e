"""The states of a Cloud TPU queued resource and of its node, as the Cloud TPU API (tpu_v2) names them, and what the
bot says about each: the stages a TPU deploy's progress shows, and what a destroy ends.

Sources (Google's reference pages for google-cloud-tpu, tpu_v2):
- QueuedResourceState.State: https://cloud.google.com/python/docs/reference/tpu/latest/google.cloud.tpu_v2.types.QueuedResourceState.State
  CREATING (received; "still working on determining if we will be able to honor this request"), ACCEPTED ("passed
  initial validation/admission control and has been persisted in the queue"), WAITING_FOR_RESOURCES (in the queue
  "until there are sufficient free resources"), PROVISIONING ("selected"; resources being provisioned), ACTIVE
  ("provisioned and are ready for use"), FAILED ("could not be completed", e.g. the 'valid until' constraint
  expired), DELETING, SUSPENDING (its resources "are being deleted", by the user or the service), SUSPENDED (its
  resources "have been deleted"). StateInitiator USER | SERVICE says who suspended it.
- Node.State: https://cloud.google.com/python/docs/reference/tpu/latest/google.cloud.tpu_v2.types.Node.State
  CREATING, READY ("TPU node has been created"), RESTARTING, REIMAGING, DELETING, REPAIRING ("may be unusable"),
  STOPPED, STOPPING, STARTING, PREEMPTED ("Only applies to Preemptible TPU Nodes"), TERMINATED, HIDING, HIDDEN,
  UNHIDING.
- The queue, in prose: https://cloud.google.com/tpu/docs/queued-resources (WAITING_FOR_RESOURCES, PROVISIONING,
  ACTIVE, FAILED, SUSPENDING, SUSPENDED).

READY means the node exists, not that vLLM serves: vLLM on the node answers /health only once it has loaded the
weights and compiled (XLA), so the target calls a slice ready only when /health answers (target.py).
"""

from __future__ import annotations

from skills.durations import format_duration
from skills.targets.plan import Plan
from skills.targets.port import ProgressStages, Stage

# Before a node exists: the request is in the queue (or being admitted to it).
QUEUED = ("CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES")
WAITING = (*QUEUED, "PROVISIONING")
SUSPENDED = ("SUSPENDING", "SUSPENDED")

# The phases TpuTarget.wait_operation reports start with these (the state, then " in ZONE..."); a zone out of
# capacity hands over to the next: "no capacity in ZONE; queued in NEXT".
_DEPLOY = (
    Stage(label="submitted"),
    # "queued": CREATING, ACCEPTED, WAITING_FOR_RESOURCES (the titles name the state; labels carry no underscore,
    # which Slack's _italic_ of a stage still to come would break on)
    Stage(label="queued", phases=(*QUEUED, "no capacity in")),
    Stage(label="PROVISIONING", phases=("PROVISIONING",)),
    Stage(label="ACTIVE: vLLM loading and compiling (XLA)", phases=("ACTIVE",)),
    Stage(label="ready"),
)
_DESTROY = (Stage(label="submitted"), Stage(label="DELETING", phases=("deleting", "DELETING")), Stage(label="deleted"))

# What each state means for the slice, as a destroy plan says it (what deleting it ends).
_WHAT_IT_IS = {
    "CREATING": "is still being admitted to the queue and has no node yet; deleting it withdraws the request",
    "ACCEPTED": "waits in the queue and has no node yet; deleting it withdraws the request",
    "WAITING_FOR_RESOURCES": "waits in the queue for capacity and has no node yet; deleting it withdraws the request",
    "PROVISIONING": "is being provisioned: its node is coming up; deleting it stops that",
    "ACTIVE": "has its node: it bills until it is deleted, serving or idle; deleting it also frees its quota",
    "FAILED": "serves nothing, but holds its quota until it is deleted; deleting it frees the quota",
    "SUSPENDING": "is losing its node{by}: it serves nothing, and holds its quota until it is deleted",
    "SUSPENDED": "serves nothing: its node was deleted{by}. It holds its quota until it is deleted; deleting it "
    "frees the quota (deploy again to serve)",
    "DELETING": "is already being deleted",
}


def deploy_stages(plan: Plan, queue_wait_s: int) -> ProgressStages:
    """A TPU deploy's stages (the queued resource's states, then vLLM's compile) and what to expect."""
    if plan.kind == "destroy":
        return ProgressStages(stages=_DESTROY, note="The queued resource and its node are deleted (DELETING).")
    zones = len((plan.spec or {}).get("zones") or [])
    note = (
        f"Each of the {zones} zones found may keep it queued up to {format_duration(queue_wait_s, 'approx')} "
        "(WAITING_FOR_RESOURCES) before the next is tried"
        if zones > 1
        else "It waits in the queue (WAITING_FOR_RESOURCES) until its zone has capacity"
    ) + "; from ACTIVE the slice bills"
    if plan.cold_start_s:
        note += f", and vLLM needs ~{format_duration(plan.cold_start_s, 'approx')} to load and compile (XLA)"
    return ProgressStages(stages=_DEPLOY, note=note + " before /health answers.")


def what_deleting_ends(state: str, initiator: str) -> str:
    """A destroy plan's note for a queued resource in `state` (StateInitiator `initiator`: SERVICE for a spot
    preemption)."""
    by = {"SERVICE": " by Cloud TPU (a spot preemption)", "USER": " at a user's request"}.get(initiator, "")
    what = _WHAT_IT_IS.get(state, f"is {state}").format(by=by)
    return f"This {state} queued resource {what}."
