"""What runs: deploy profiles, vLLM's flags (one model: parse <-> render), the serving configuration, sizes and a
changed field; every package above reads them, they read nothing above."""
