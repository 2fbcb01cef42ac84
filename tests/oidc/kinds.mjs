// Stand-ins of GitHub and of Microsoft's identity platform for the sign-in tests of the
// provider kinds (tests/api/signin_kinds.rs), each on its own loopback port.
//
// GitHub: the OAuth web flow (`/login/oauth/authorize`, a login form; `POST
// /login/oauth/access_token`, which checks the client secret, the redirect URI and the
// PKCE verifier and, as GitHub does, answers every error with HTTP 200 and
// `{"error": ...}`) and the REST API of a GitHub Enterprise Server (`/api/v3/user`,
// `/user/emails`, `/user/memberships/orgs/{org}`), which refuses a token in the URL.
// Its users are the config's, replaced by `POST /_standin/users` (a rename); every call
// is recorded, `GET /_standin/calls` answers them.
//
// Microsoft: `/{tenant}/v2.0/.well-known/openid-configuration` whose issuer, for `common`,
// `organizations` and `consumers`, is `{base}/{tenantid}/v2.0`; ID tokens (RS256) of the
// tenant after the `@` of the login (`alice@<tenant id>`), with `tid` and `iss` of that
// tenant, except a login starting `liar` whose `iss` names the tenant
// bbbbbbbb-0000-4000-8000-00000000000b.
//
//   node kinds.mjs '<json>'
//   json: {"clientId": "postal", "clientSecret": "...", "redirectBase": "http://127.0.0.1:P",
//          "users": {"octocat": {"id": 101, "emails": [...], "orgs": ["acme"]}, ...}}
// Prints `github URL`, `microsoft URL`, then `ready`; stops when its stdin closes.
import http from "node:http";
import crypto from "node:crypto";
import { generateKeyPair, exportJWK, SignJWT } from "jose";

const config = JSON.parse(process.argv[2]);

function listen(handler) {
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const url = new URL(req.url, "http://localhost");
    try {
      await handler(req, res, url, Buffer.concat(chunks).toString());
    } catch (err) {
      console.error(err);
      res.writeHead(500).end(String(err));
    }
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${server.address().port}`)),
  );
}

function json(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

function loginForm(res, action) {
  res.writeHead(200, { "content-type": "text/html" }).end(
    `<form method="post" action="${action}"><input type="hidden" name="prompt" value="login">` +
      `<input name="login"><input name="password" type="password"><button>Sign in</button></form>`,
  );
}

const s256 = (verifier) => crypto.createHash("sha256").update(verifier).digest("base64url");
const random = () => crypto.randomBytes(16).toString("hex");
const redirectOk = (uri) => typeof uri === "string" && uri.startsWith(`${config.redirectBase}/account/callback/`);

// ---- GitHub ----
let users = config.users;
const calls = [];
const pending = new Map(); // request id -> the authorize request
const codes = new Map(); // code -> {login, redirectUri, challenge, used}
const tokens = new Map(); // token -> login

const github = await listen(async (req, res, url, body) => {
  const path = url.pathname;
  const bearer = (req.headers.authorization || "").match(/^Bearer (.+)$/)?.[1];
  if (!path.startsWith("/_standin/")) {
    calls.push({
      method: req.method,
      path,
      bearer: Boolean(bearer),
      tokenInUrl: url.searchParams.has("access_token"),
      accept: req.headers.accept || null,
    });
  }
  if (path === "/_standin/calls") return json(res, 200, calls);
  if (path === "/_standin/users" && req.method === "POST") {
    users = JSON.parse(body);
    return json(res, 200, { ok: true });
  }
  if (path === "/login/oauth/authorize" && req.method === "GET") {
    const q = Object.fromEntries(url.searchParams);
    if (q.client_id !== config.clientId || !redirectOk(q.redirect_uri)) {
      return res.writeHead(400).end("unknown client or redirect_uri");
    }
    if (q.code_challenge_method !== "S256" || !q.code_challenge || !q.state) {
      return res.writeHead(400).end("PKCE S256 and state are required here");
    }
    const id = random();
    pending.set(id, q);
    return loginForm(res, `/login/oauth/authorize/done?request=${id}`);
  }
  if (path === "/login/oauth/authorize/done" && req.method === "POST") {
    const q = pending.get(url.searchParams.get("request"));
    pending.delete(url.searchParams.get("request"));
    const login = new URLSearchParams(body).get("login");
    if (!q || !users[login]) return res.writeHead(400).end("no such request or user");
    const code = random();
    codes.set(code, { login, redirectUri: q.redirect_uri, challenge: q.code_challenge, used: false });
    const back = new URL(q.redirect_uri);
    back.searchParams.set("code", code);
    back.searchParams.set("state", q.state);
    return res.writeHead(302, { location: back.toString() }).end();
  }
  if (path === "/login/oauth/access_token" && req.method === "POST") {
    const form = Object.fromEntries(new URLSearchParams(body));
    // GitHub answers its errors with 200.
    if (form.client_id !== config.clientId || form.client_secret !== config.clientSecret) {
      return json(res, 200, { error: "incorrect_client_credentials" });
    }
    const grant = codes.get(form.code);
    if (!grant || grant.used) return json(res, 200, { error: "bad_verification_code" });
    grant.used = true;
    if (grant.redirectUri !== form.redirect_uri) {
      return json(res, 200, { error: "redirect_uri_mismatch" });
    }
    if (!form.code_verifier || s256(form.code_verifier) !== grant.challenge) {
      return json(res, 200, { error: "bad_verification_code", error_description: "PKCE" });
    }
    const token = `gho_${random()}`;
    tokens.set(token, users[grant.login].id);
    return json(res, 200, { access_token: token, token_type: "bearer", scope: "read:user,user:email" });
  }
  if (path.startsWith("/api/v3/")) {
    if (url.searchParams.has("access_token")) {
      return json(res, 400, { message: "Passing the token in the URL is not allowed" });
    }
    const id = tokens.get(bearer);
    const entry = Object.entries(users).find(([, u]) => u.id === id);
    if (id === undefined || !entry) return json(res, 401, { message: "Bad credentials" });
    const [login, user] = entry;
    if (path === "/api/v3/user") return json(res, 200, { id, login, name: null, email: null });
    if (path === "/api/v3/user/emails") return json(res, 200, user.emails || []);
    const org = path.match(/^\/api\/v3\/user\/memberships\/orgs\/([^/]+)$/)?.[1];
    if (org) {
      return (user.orgs || []).includes(org)
        ? json(res, 200, { state: "active", role: "member", organization: { login: org } })
        : json(res, 404, { message: "Not Found" });
    }
  }
  res.writeHead(404).end("not found");
});

// ---- Microsoft ----
const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
const jwk = { ...(await exportJWK(publicKey)), alg: "RS256", use: "sig", kid: "ms-key" };
const msPending = new Map();
const msCodes = new Map();
const multi = ["common", "organizations", "consumers"];

const microsoft = await listen(async (req, res, url, body) => {
  const base = microsoftBase;
  const parts = url.pathname.split("/").filter(Boolean);
  const tenant = parts[0];
  const rest = parts.slice(1).join("/");
  if (rest === "v2.0/.well-known/openid-configuration") {
    const named = multi.includes(tenant) ? "{tenantid}" : tenant;
    return json(res, 200, {
      issuer: `${base}/${named}/v2.0`,
      authorization_endpoint: `${base}/${tenant}/oauth2/v2.0/authorize`,
      token_endpoint: `${base}/${tenant}/oauth2/v2.0/token`,
      jwks_uri: `${base}/${tenant}/discovery/v2.0/keys`,
      response_types_supported: ["code", "id_token", "code id_token"],
      subject_types_supported: ["pairwise"],
      id_token_signing_alg_values_supported: ["RS256"],
      scopes_supported: ["openid", "profile", "email", "offline_access"],
      token_endpoint_auth_methods_supported: ["client_secret_post", "client_secret_basic"],
    });
  }
  if (rest === "discovery/v2.0/keys") return json(res, 200, { keys: [jwk] });
  if (rest === "oauth2/v2.0/authorize" && req.method === "GET") {
    const q = Object.fromEntries(url.searchParams);
    if (q.client_id !== config.clientId || !redirectOk(q.redirect_uri) || q.code_challenge_method !== "S256") {
      return res.writeHead(400).end("unknown client, redirect_uri or PKCE method");
    }
    const id = random();
    msPending.set(id, { ...q, tenant });
    return loginForm(res, `/${tenant}/oauth2/v2.0/authorize/done?request=${id}`);
  }
  if (rest === "oauth2/v2.0/authorize/done" && req.method === "POST") {
    const q = msPending.get(url.searchParams.get("request"));
    const login = new URLSearchParams(body).get("login") || "";
    const tid = login.split("@")[1];
    if (!q || !tid) return res.writeHead(400).end("no such request, or a login without @tenant");
    const code = random();
    msCodes.set(code, { login, tid, ...q, used: false, authTime: Math.floor(Date.now() / 1000) });
    const back = new URL(q.redirect_uri);
    back.searchParams.set("code", code);
    back.searchParams.set("state", q.state);
    return res.writeHead(302, { location: back.toString() }).end();
  }
  if (rest === "oauth2/v2.0/token" && req.method === "POST") {
    const form = Object.fromEntries(new URLSearchParams(body));
    const basic = (req.headers.authorization || "").match(/^Basic (.+)$/)?.[1];
    let [id, secret] = [form.client_id, form.client_secret];
    if (basic) {
      [id, secret] = Buffer.from(basic, "base64").toString().split(":").map(decodeURIComponent);
    }
    if (id !== config.clientId || secret !== config.clientSecret) {
      return json(res, 401, { error: "invalid_client" });
    }
    const grant = msCodes.get(form.code);
    if (!grant || grant.used || grant.redirect_uri !== form.redirect_uri) {
      return json(res, 400, { error: "invalid_grant" });
    }
    grant.used = true;
    if (!form.code_verifier || s256(form.code_verifier) !== grant.code_challenge) {
      return json(res, 400, { error: "invalid_grant", error_description: "PKCE" });
    }
    const named = grant.login.startsWith("liar") ? "bbbbbbbb-0000-4000-8000-00000000000b" : grant.tid;
    const idToken = await new SignJWT({
      tid: grant.tid,
      nonce: grant.nonce,
      preferred_username: grant.login,
      // Microsoft's e-mail claim is not verified: never shown.
      email: grant.login,
      // When the person signed in here, as OpenID Connect requires once `max_age` is asked.
      ...(grant.max_age !== undefined ? { auth_time: grant.authTime } : {}),
    })
      .setProtectedHeader({ alg: "RS256", kid: "ms-key" })
      .setIssuer(`${base}/${named}/v2.0`)
      .setSubject(`sub-of-${grant.login.split("@")[0]}`)
      .setAudience(config.clientId)
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(privateKey);
    return json(res, 200, {
      access_token: `ms_${random()}`,
      token_type: "Bearer",
      expires_in: 3600,
      scope: "openid email profile",
      id_token: idToken,
    });
  }
  res.writeHead(404).end("not found");
});
const microsoftBase = microsoft;

console.log(`github ${github}`);
console.log(`microsoft ${microsoft}`);
console.log("ready");
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
process.stdin.on("close", () => process.exit(0));
