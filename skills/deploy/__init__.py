"""Deploy: vLLM flags (one model: parse <-> render), the rendered Cloud Run service, diffs, gcloud
equivalents, and write plans (the only thing called a plan) from building to confirming and executing."""
