// A program written against the generated TypeScript types (openapi-typescript) and
// openapi-fetch (clients/run.sh): every call of the contract, typed errors, and every
// field the server sends declared by the document (types vanish at run time, so the
// response is walked against the document's schema).
import createClient from "openapi-fetch";
import type { paths } from "./generated/schema";

declare const process: { argv: string[] };
const [base, key, publishable, origin] = process.argv.slice(2);
const client = createClient<paths>({ baseUrl: base });
const document = (await (await fetch(`${base}/openapi.json`)).json()) as any;

type Schema = Record<string, any>;
function resolve(schema: Schema): Schema {
  while (schema.$ref) schema = document.components.schemas[schema.$ref.split("/").pop()];
  return schema;
}
// The properties a value may carry under `schema`, following allOf/oneOf/anyOf.
function untyped(value: unknown, schema: Schema, path: string): string[] {
  schema = resolve(schema);
  if (schema.allOf) {
    // allOf: one schema whose properties are those of every part.
    const parts = schema.allOf.map(resolve);
    const merged = { ...schema, allOf: undefined, properties: Object.assign({}, ...parts.map((p: Schema) => p.properties ?? {})) };
    const items = parts.find((p: Schema) => p.items)?.items;
    return untyped(value, items ? { ...merged, items } : merged, path);
  }
  const parts = [...(schema.oneOf ?? []), ...(schema.anyOf ?? [])];
  if (parts.length) {
    // oneOf/anyOf: the branch that declares the most of the value.
    const each = parts.map((p: Schema) => untyped(value, p, path));
    return each.reduce((a, b) => (a.length <= b.length ? a : b));
  }
  if (Array.isArray(value)) return value.flatMap((v, i) => untyped(v, schema.items ?? {}, `${path}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  const properties = schema.properties ?? {};
  return Object.entries(value).flatMap(([name, v]) =>
    name in properties ? untyped(v, properties[name], `${path}.${name}`) : [`${path}.${name}`],
  );
}
function check(path: string, status: number, response: Response, body: unknown, expected: number, method = "post") {
  if (response.status !== expected) throw new Error(`${path}: status ${response.status}, wanted ${expected}`);
  const schema = document.paths[path][method].responses[String(status)].content["application/json; charset=utf-8"].schema;
  const leftovers = untyped(body, schema, path);
  if (leftovers.length) throw new Error(`fields the document does not declare: ${leftovers.join(", ")}`);
}
function assert(condition: boolean, what: string) {
  if (!condition) throw new Error(`failed: ${what}`);
}

const lookup = await client.POST("/api/lookup", { body: { zipcode: "90210", apiKey: key } });
check("/api/lookup", 200, lookup.response, lookup.data, 200);
assert(lookup.data?.city === "Beverly Hills" && lookup.data.ST === "CA", "lookup 90210");

const city = await client.POST("/api/city", { body: { city: "Beverly Hills", ST: "CA", apiKey: key } });
check("/api/city", 200, city.response, city.data, 200);
assert(city.data?.zipcodes.includes("90210") === true, "city Beverly Hills CA");

const meta = await client.POST("/api/metacode", { body: { zipcode: "100-0001", country: "JP", apiKey: key } });
check("/api/metacode", 200, meta.response, meta.data, 200);
assert(meta.data !== undefined && "postalCode" in meta.data.meta && meta.data.meta.postalCode === "1000001", "metacode JP");

const valid = await client.POST("/api/validate", { body: { zipcode: "90210", apiKey: key } });
check("/api/validate", 200, valid.response, valid.data, 200);
assert(valid.data?.valid === true, "validate 90210");

const bulk = await client.POST("/api/validate-bulk", {
  body: {
    apiKey: key,
    records: [
      { postalCode: "90210", countryCode: "US" },
      { postalCode: "SW1A 1AA", countryCode: "GB" },
      { postalCode: "99999", countryCode: "US" },
    ],
  },
});
check("/api/validate-bulk", 200, bulk.response, bulk.data, 200);
assert(bulk.data?.results.map((r) => r.reason ?? null).join() === ",,not_found", "bulk reasons");
assert(bulk.data?.totalCost === 0.000084, "bulk totalCost");

// The same bulk request retried with its Idempotency-Key: the first answer, not charged again.
const keyed = { params: { header: { "Idempotency-Key": "clients-ts-1" } } };
const records = [
  { postalCode: "90210", countryCode: "US" as const },
  { postalCode: "SW1A 1AA", countryCode: "GB" as const },
];
const first = await client.POST("/api/validate-bulk", { ...keyed, body: { apiKey: key, records } });
const again = await client.POST("/api/validate-bulk", { ...keyed, body: { apiKey: key, records } });
check("/api/validate-bulk", 200, again.response, again.data, 200);
assert(first.response.headers.get("Idempotent-Replayed") === null, "first answer not replayed");
assert(again.response.headers.get("Idempotent-Replayed") === "true", "retry replayed");
assert(JSON.stringify(again.data) === JSON.stringify(first.data), "replay equal to the first answer");
const reused = await client.POST("/api/validate-bulk", { ...keyed, body: { apiKey: key, records: records.slice(1) } });
check("/api/validate-bulk", 422, reused.response, reused.error, 422);
assert(reused.error?.error === "Idempotency-Key already used with a different request body", "422 as a typed error");

const about = await client.POST("/api/aboutapi", { body: { apiKey: key } });
check("/api/aboutapi", 200, about.response, about.data, 200);
assert(about.data?.coverage.includes("GeoNames") === true, "aboutapi coverage");

const near = await client.POST("/api/nearest", {
  body: { latitude: 34.0901, longitude: -118.4065, limit: 3, apiKey: key },
});
check("/api/nearest", 200, near.response, near.data, 200);
assert(near.data?.results[0]?.zipcode === "90210", "nearest to Beverly Hills");

const codes = await client.POST("/api/autocomplete", { body: { q: "9021", apiKey: key } });
check("/api/autocomplete", 200, codes.response, codes.data, 200);
assert(codes.data?.results.some((r) => r.zipcode === "90210") === true, "autocomplete 9021");

const places = await client.POST("/api/suggest", { body: { q: "Beverly", ST: "CA", apiKey: key } });
check("/api/suggest", 200, places.response, places.data, 200);
assert(places.data?.results[0]?.city === "Beverly Hills", "suggest Beverly");

const listed = await client.POST("/api/countries", { body: { apiKey: key } });
check("/api/countries", 200, listed.response, listed.data, 200);
assert(listed.data?.countries.some((c) => c.code === "US") === true, "countries has US");

const provenance = await client.POST("/api/dataset", { body: { apiKey: key } });
check("/api/dataset", 200, provenance.response, provenance.data, 200);
assert((provenance.data?.dataset.generation ?? 0) >= 1, "dataset generation");
assert(provenance.data?.dataset.provenance?.sources.some((s) => s.role === "postal") === true, "dataset sources");

const denied = await client.POST("/api/lookup", { body: { zipcode: "90210", apiKey: "pk_not_a_key" } });
check("/api/lookup", 401, denied.response, denied.error, 401);
assert(denied.error?.error === "Invalid API key", "401 as a typed error");

const missing = await client.POST("/api/lookup", { body: { zipcode: "00000", apiKey: key } });
check("/api/lookup", 404, missing.response, missing.error, 404);
assert(missing.error?.error === "ZIP code not found", "404 as a typed error");
assert(missing.error !== undefined && !("retired" in missing.error), "404 of a code that never existed has no retired");

// Checkout forms: every place of a code, a typed city against it, GET with the key.
const every = await client.POST("/api/places", { body: { zipcode: "77716", country: "DE", apiKey: key } });
check("/api/places", 200, every.response, every.data, 200);
assert(every.data?.places.map((p) => p.city).join() === "Haslach im Kinzigtal,Hofstetten,Fischerbach", "places 77716");

const typed = await client.POST("/api/verify", {
  body: { zipcode: "77716", country: "DE", city: "Fischerbah", apiKey: key },
});
check("/api/verify", 200, typed.response, typed.data, 200);
assert(typed.data?.result === "fuzzy_match" && typed.data.matchedCity === "Fischerbach", "verify typo");

const checked = await client.POST("/api/verify-bulk", {
  body: {
    apiKey: key,
    records: [
      { postalCode: "77716", countryCode: "DE", city: "Hofstetten" },
      { postalCode: "77716", countryCode: "DE", city: "Berlin" },
    ],
  },
});
check("/api/verify-bulk", 200, checked.response, checked.data, 200);
assert(checked.data?.results.map((r) => r.result).join() === "match,conflict", "verify-bulk");

// A page's GET: its publishable key in the URL, its Origin (a secret key there is a 400).
const got = await client.GET("/api/lookup", {
  params: { query: { zipcode: "90210", key: publishable } },
  headers: { Origin: origin },
});
check("/api/lookup", 200, got.response, got.data, 200, "get");
assert(got.data?.city === "Beverly Hills", "GET lookup");

console.log("typescript client: 21 calls, every field declared");
