"""A program written against the generated Python client (clients/run.sh): every call
of the contract, typed errors, and no field the client failed to model."""

import sys

from postal_client import Client
from postal_client.api.postal_codes import autocomplete, get_metacode, lookup, lookup_get
from postal_client.api.postal_codes import places as code_places
from postal_client.api.cities import find_city, suggest
from postal_client.api.geography import nearest
from postal_client.api.validation import validate, validate_bulk, verify, verify_bulk
from postal_client.api.service import about_api, countries, dataset
from postal_client.models import (
    AboutRequest,
    AutocompleteRequest,
    BulkRecordRequest,
    BulkRequest,
    CityRequest,
    CodeRequest,
    CountriesRequest,
    DatasetRequest,
    ErrorBody,
    KeyReusedBody,
    NearestRequest,
    NotFoundBody,
    SuggestRequest,
    VerifyBulkRequest,
    VerifyRecordRequest,
    VerifyRequest,
)
from postal_client.types import Unset

base, key, publishable, origin = sys.argv[1:5]
client = Client(base_url=base, raise_on_unexpected_status=True)


def untyped(value, path="response"):
    """Every field the server sent must be a modelled attribute, at every depth."""
    extra = getattr(value, "additional_properties", None)
    if extra:
        raise AssertionError(f"{path}: fields the client did not model: {sorted(extra)}")
    if isinstance(value, list):
        for i, item in enumerate(value):
            untyped(item, f"{path}[{i}]")
    elif hasattr(value, "to_dict") and hasattr(value, "__attrs_attrs__"):
        for field in value.__attrs_attrs__:
            if field.name != "additional_properties":
                untyped(getattr(value, field.name), f"{path}.{field.name}")


def call(module, body, status):
    reply = module.sync_detailed(client=client, body=body)
    assert reply.status_code == status, (module.__name__, reply.status_code, reply.content)
    assert reply.parsed is not None, (module.__name__, "not parsed", reply.content)
    untyped(reply.parsed, module.__name__)
    return reply.parsed


found = call(lookup, CodeRequest(zipcode="90210", api_key=key), 200)
assert found.city == "Beverly Hills" and found.st == "CA", found
assert isinstance(found.balance, float) and not isinstance(found.performance, Unset)

city = call(find_city, CityRequest(city="Beverly Hills", st="CA", api_key=key), 200)
assert "90210" in city.zipcodes, city

meta = call(get_metacode, CodeRequest(zipcode="100-0001", country="JP", api_key=key), 200)
assert meta.meta.postal_code == "1000001", meta.meta

valid = call(validate, CodeRequest(zipcode="90210", api_key=key), 200)
assert valid.valid is True, valid

records = [
    BulkRecordRequest(postal_code="90210", country_code="US"),
    BulkRecordRequest(postal_code="SW1A 1AA", country_code="GB"),
    BulkRecordRequest(postal_code="99999", country_code="US"),
]
bulk = call(validate_bulk, BulkRequest(api_key=key, records=records), 200)
reasons = [str(r.reason) if r.reason else None for r in bulk.results]
assert [r.valid for r in bulk.results] == [True, True, False], bulk
assert reasons[2] == "not_found", reasons
assert bulk.total_cost == 0.000084, bulk.total_cost

# The same bulk request retried with its Idempotency-Key: the first answer, not charged again.
keyed = BulkRequest(api_key=key, records=records)
first = validate_bulk.sync_detailed(client=client, body=keyed, idempotency_key="clients-py-1")
again = validate_bulk.sync_detailed(client=client, body=keyed, idempotency_key="clients-py-1")
assert first.status_code == 200 and again.status_code == 200, (first, again)
assert "Idempotent-Replayed" not in first.headers, first.headers
assert again.headers["Idempotent-Replayed"] == "true" and again.content == first.content, again
untyped(again.parsed, "validate_bulk replay")
reused = validate_bulk.sync_detailed(
    client=client, body=BulkRequest(api_key=key, records=records[:1]), idempotency_key="clients-py-1"
)
assert reused.status_code == 422 and isinstance(reused.parsed, KeyReusedBody), reused
assert reused.parsed.error == "Idempotency-Key already used with a different request body", reused

about = call(about_api, AboutRequest(api_key=key), 200)
assert "GeoNames" in about.coverage, about

near = call(nearest, NearestRequest(latitude=34.0901, longitude=-118.4065, limit=3, api_key=key), 200)
assert near.results[0].zipcode == "90210" and near.results[0].distance_km == 0.0, near

codes = call(autocomplete, AutocompleteRequest(q="9021", api_key=key), 200)
assert "90210" in [r.zipcode for r in codes.results], codes

places = call(suggest, SuggestRequest(q="Beverly", st="CA", api_key=key), 200)
assert places.results[0].city == "Beverly Hills", places

listed = call(countries, CountriesRequest(api_key=key), 200)
assert "US" in [c.code for c in listed.countries], listed

provenance = call(dataset, DatasetRequest(api_key=key), 200)
assert provenance.dataset.generation >= 1, provenance
roles = [s.role for s in provenance.dataset.provenance.sources]
assert "postal" in roles and "country_info" in roles, roles

denied = call(lookup, CodeRequest(zipcode="90210", api_key="pk_not_a_key"), 401)
assert isinstance(denied, ErrorBody) and denied.error == "Invalid API key", denied
missing = call(lookup, CodeRequest(zipcode="00000", api_key=key), 404)
assert isinstance(missing, NotFoundBody) and missing.error == "ZIP code not found", missing
assert isinstance(missing.retired, Unset), missing

# Checkout forms: every place of a code, a typed city against it, GET with the key.
every = call(code_places, CodeRequest(zipcode="77716", country="DE", api_key=key), 200)
assert [p.city for p in every.places] == ["Haslach im Kinzigtal", "Hofstetten", "Fischerbach"], every
assert every.places[0].county == "Freiburg Region", every.places[0]

typed = call(verify, VerifyRequest(zipcode="77716", country="DE", city="Fischerbah", api_key=key), 200)
assert str(typed.result) == "fuzzy_match" and typed.matched_city == "Fischerbach", typed

checked = call(
    verify_bulk,
    VerifyBulkRequest(
        api_key=key,
        records=[
            VerifyRecordRequest(postal_code="77716", country_code="DE", city="Hofstetten"),
            VerifyRecordRequest(postal_code="77716", country_code="DE", city="Berlin"),
        ],
    ),
    200,
)
assert [str(r.result) for r in checked.results] == ["match", "conflict"], checked
assert len(checked.results[1].places) == 3, checked.results[1]

# A page's GET: its publishable key in the URL, its Origin (a secret key there is a 400).
page = client.with_headers({"Origin": origin})
got = lookup_get.sync_detailed(client=page, zipcode="90210", key=publishable)
assert got.status_code == 200 and got.parsed.city == "Beverly Hills", got
untyped(got.parsed, "lookup_get")

print("python client: 21 calls, every field typed")
