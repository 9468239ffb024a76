"""Shared helpers for the Python client tests: the official client (Debian's python3-kubernetes)
configured from $KUBECONFIG, which tests/kubesim/clients/run points at a fresh kubesim."""
import os
import uuid

from kubernetes import client, config


def api_client():
    return config.new_client_from_config(config_file=os.environ["KUBECONFIG"])


def unique(prefix):
    """A fresh RFC 1123 name, so tests in one file never collide."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def status_of(exc):
    """The Status body of an ApiException as a dict (code, reason, details...)."""
    import json
    return json.loads(exc.body) if exc.body else {}
