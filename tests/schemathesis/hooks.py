"""Schemathesis hooks for tests/schemathesis.sh: a real API key in every generated body
(secret) and GET query (publishable, with its page's Origin), and a new Idempotency-Key
for every case that sends a valid one.

A `before_call` hook, so that every phase's cases carry the key (a `map_body` hook
reaches only the fuzzing phase's: the examples and coverage phases then met 401 on
every operation and never reached the fields behind the key). Only a body whose
`apiKey` is already a non-empty string gets the real key: a case made to break `apiKey`
(missing, empty, another type) keeps its broken value, so the server must still reject
it.

Every case that carries a well-formed `Idempotency-Key` gets a new UUID instead, as a
real client sends a new key for each new request: generated keys repeat ("0", "00")
across cases with different bodies, which the server rightly refuses with 422 (the same
key for another request), and schemathesis would count that against positive data. A
malformed key is kept, so the server must still answer it 400.
"""

import os
import re
import uuid

import schemathesis

API_KEY = os.environ["POSTAL_API_KEY"]
# A URL's `key=` takes publishable keys only, sent from a page of their origin.
PUBLISHABLE_KEY = os.environ["POSTAL_PUBLISHABLE_KEY"]
PAGE_ORIGIN = os.environ["POSTAL_PAGE_ORIGIN"]
IDEMPOTENCY_KEY = re.compile(r"[!-~]{1,255}")


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("apiKey"), str) and body["apiKey"]:
        body["apiKey"] = API_KEY
    # The GET forms carry the key as the `key` query parameter.
    query = case.query
    if isinstance(query, dict) and isinstance(query.get("key"), str) and query["key"]:
        query["key"] = PUBLISHABLE_KEY
        if case.headers is None:
            case.headers = {}
        case.headers["Origin"] = PAGE_ORIGIN
    headers = case.headers  # a case-insensitive mapping, not a dict
    if headers is not None:
        for name, value in list(headers.items()):
            if name.lower() == "idempotency-key" and isinstance(value, str) and IDEMPOTENCY_KEY.fullmatch(value):
                headers[name] = str(uuid.uuid4())
