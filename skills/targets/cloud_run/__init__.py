"""The Cloud Run serving target: its v2 Service JSON (render, diff, merge), plans and gcloud equivalents."""
