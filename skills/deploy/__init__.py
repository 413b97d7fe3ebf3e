"""Deploy: write plans across targets, from asking to confirming, locking, executing, watching and reconciling
(the plan itself and what each target builds into it live in skills/targets/)."""
