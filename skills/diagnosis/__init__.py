"""Diagnosis: analyzers (one module per failure family), findings in causal order, remediation."""
