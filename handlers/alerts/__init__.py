"""Alert webhooks, one module per source (payload model, formatter to a domain Alert, fingerprint fields)."""
