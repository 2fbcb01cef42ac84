// Three (or N) real OpenID Providers for the account dashboard's tests: oidc-provider
// (OpenID Certified), each its own issuer on its own loopback port with its own signing
// keys. Its development interactions take any login name (the subject) and any password.
//
//   node providers.mjs '<json>'
//   json: {"count": 3, "redirectUris": ["http://127.0.0.1:PORT/account/callback/p1", ...],
//          "clients": [{"client_id": "postal", "client_secret": "..."}, ...],
//          "idTokenSigningAlgValues": ["RS256", "HS256"]}   (optional)
// A client's other fields are oidc-provider's client metadata (for example
// `"id_token_signed_response_alg": "HS256"`, which needs HS256 among
// `idTokenSigningAlgValues`: the algorithms the discovery document lists).
// Prints one line per issuer, `issuer http://127.0.0.1:PORT`, then `ready`; stops when
// its stdin closes (the test ends).
//
// With OIDC_KEY_CACHE set (a directory: the tests give target/tmp/oidc-keys), provider N's
// signing key is generated once and kept there, `key-N.json`, for every later run of this
// script: an RSA key costs 150-200 ms of CPU, and a test run starts about 50 of these
// processes of three providers each. The providers of one process still sign with keys of
// their own (key-1, key-2...).
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { generateKeyPair, exportJWK } from "jose";
import Provider from "oidc-provider";

const config = JSON.parse(process.argv[2]);

async function signingKey(index) {
  const kid = `key-${index}`;
  const cache = process.env.OIDC_KEY_CACHE;
  const file = cache && path.join(cache, `${kid}.json`);
  if (file && fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, "utf8"));
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), alg: "RS256", use: "sig", kid };
  if (file) {
    // Written whole, then renamed: a process starting beside this one reads no half.
    fs.mkdirSync(cache, { recursive: true });
    fs.writeFileSync(`${file}.${process.pid}`, JSON.stringify(jwk), { mode: 0o600 });
    fs.renameSync(`${file}.${process.pid}`, file);
  }
  return jwk;
}

async function start(index) {
  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const jwk = await signingKey(index);
  const provider = new Provider(issuer, {
    clients: config.clients.map((c) => ({
      redirect_uris: config.redirectUris,
      grant_types: ["authorization_code"],
      response_types: ["code"],
      ...c,
    })),
    ...(config.idTokenSigningAlgValues
      ? { enabledJWA: { idTokenSigningAlgValues: config.idTokenSigningAlgValues } }
      : {}),
    jwks: { keys: [jwk] },
    pkce: { required: () => true },
    claims: { openid: ["sub"], email: ["email", "email_verified"] },
    // The scopes' claims in the ID token too, as Google, Entra ID and GitLab put them.
    conformIdTokenClaims: false,
    findAccount: async (ctx, sub) => ({
      accountId: sub,
      claims: async () => ({ sub, email: `${sub}@provider${index}.test`, email_verified: true }),
    }),
    cookies: { keys: [`cookie-key-${index}-${Math.random()}`] },
    ttl: { AuthorizationCode: 60, IdToken: 3600, AccessToken: 3600, Session: 3600, Interaction: 600, Grant: 3600 },
  });
  provider.on("server_error", (ctx, err) => console.error(`provider ${index}:`, err));
  server.on("request", provider.callback());
  return issuer;
}

const issuers = [];
for (let i = 1; i <= config.count; i++) issuers.push(await start(i));
for (const issuer of issuers) console.log(`issuer ${issuer}`);
console.log("ready");
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
process.stdin.on("close", () => process.exit(0));
