"""Schemathesis hooks for tests/schemathesis.sh: a real API key in every generated body
and GET query.

A `before_call` hook, so that every phase's cases carry the key (a `map_body` hook
reaches only the fuzzing phase's: the examples and coverage phases then met 401 on
every operation and never reached the fields behind the key). Only a body whose
`apiKey` is already a non-empty string gets the real key: a case made to break `apiKey`
(missing, empty, another type) keeps its broken value, so the server must still reject
it.
"""

import os

import schemathesis

API_KEY = os.environ["POSTAL_API_KEY"]


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("apiKey"), str) and body["apiKey"]:
        body["apiKey"] = API_KEY
    # The GET forms carry the key as the `key` query parameter.
    query = case.query
    if isinstance(query, dict) and isinstance(query.get("key"), str) and query["key"]:
        query["key"] = API_KEY
