"""Where units run: msgpack codec, Ray backend, ZeroMQ server/client, parameter sweeps."""
