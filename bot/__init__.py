"""The process: settings, ASGI app, wiring of ports to adapters, Redis state, CLI."""
