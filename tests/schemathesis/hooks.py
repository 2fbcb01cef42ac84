"""Schemathesis hooks for tests/schemathesis.sh: a real API key in every generated body.

Only a body whose `apiKey` is already a non-empty string gets the real key: a case made
to break `apiKey` (missing, empty, another type) keeps its broken value, so the server
must still reject it.
"""

import os

import schemathesis

API_KEY = os.environ["POSTAL_API_KEY"]


@schemathesis.hook
def map_body(ctx, body):
    if isinstance(body, dict) and isinstance(body.get("apiKey"), str) and body["apiKey"]:
        body["apiKey"] = API_KEY
    return body
