"""A local stand-in of Stripe for the tests of top-ups by card (tests/api/payments.rs).

It takes the Checkout Session creation exactly as Stripe's API documents it (a form body,
`Authorization: Bearer <secret key>`, an `Idempotency-Key`; an unknown or missing
parameter is refused with Stripe's error shape), answers the session's retrieval, serves
a "checkout page" whose Pay button marks the session paid and posts the signed
`checkout.session.completed` event to the service's webhook, then sends the browser to
the session's `success_url`. It signs events with Stripe's scheme and checks each
signature with the official `stripe` library (`stripe.WebhookSignature.verify_header`)
before sending it, so the scheme the service verifies is Stripe's, not ours.

Usage: python standin.py '{"secretKey": "sk_test_…", "webhookSecret": "whsec_…",
                           "webhook": "http://127.0.0.1:PORT/account/stripe/webhook"}'
It prints `listening http://127.0.0.1:PORT`, then serves until killed.

Test hooks (not Stripe's): POST /test/event {"session", "type", "timestamp"?, "secret"?,
"claimPaid"?} gives a signed event {"payload", "header"} without sending it;
POST /test/refund {"session", "amount", "noMetadata"?} refunds cents of the session's
charge and sends `charge.refunded` (its charge's metadata left out with `noMetadata`);
POST /test/dispute {"session", "dispute"?, "signOnly"?} sends `charge.dispute.created` for
the session's charge (a new dispute id, or `dispute` again), or only gives it signed; POST /test/session {"session", "set"}
changes what the API answers of a session (`amount_total`, `currency`); GET /test/requests
lists the API requests received; GET /test/deliveries the webhook deliveries and the
service's answers; POST /test/config {"deliverOnPay": false} pays without sending the
event, {"webhook": URL} sends the next ones there, {"sessionUrl": URL} answers that
payment page for new sessions.

Besides creating and retrieving a session, the API lists them by PaymentIntent
(GET /v1/checkout/sessions?payment_intent=pi_…), as Stripe's does.
"""

import hashlib
import hmac
import html
import json
import secrets
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import stripe

CONFIG = json.loads(sys.argv[1])
LOCK = threading.Lock()
SESSIONS = {}  # id -> session object
CHARGES = {}  # session id -> charge object
IDEMPOTENT = {}  # key -> (form, answer)
REQUESTS = []  # what the API received
DELIVERIES = []  # what the webhook answered
SETTINGS = {"deliverOnPay": True}
BASE = ""

# The parameters `postal` sends, each required: Stripe takes many more, but an unknown one
# here means the request differs from what docs/payments.md says is sent.
PARAMS = {
    "mode",
    "line_items[0][price_data][currency]",
    "line_items[0][price_data][unit_amount]",
    "line_items[0][price_data][product_data][name]",
    "line_items[0][quantity]",
    "client_reference_id",
    "metadata[topup_id]",
    "metadata[account_id]",
    "payment_intent_data[metadata][topup_id]",
    "payment_intent_data[metadata][account_id]",
    "success_url",
    "cancel_url",
}


def new_id(prefix):
    return prefix + "_test_" + secrets.token_hex(12)


def sign(payload, secret, timestamp):
    mac = hmac.new(secret.encode(), f"{timestamp}.{payload}".encode(), hashlib.sha256)
    header = f"t={timestamp},v1={mac.hexdigest()}"
    # The official library's check of the same header (the timestamp's tolerance aside:
    # a test asks for stale ones on purpose).
    stripe.WebhookSignature.verify_header(payload, header, secret, tolerance=None)
    return header


def event(kind, obj, timestamp=None, secret=None):
    body = {
        "id": new_id("evt"),
        "object": "event",
        "api_version": "2024-06-20",
        "created": int(time.time()),
        "data": {"object": obj},
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": kind,
    }
    payload = json.dumps(body, separators=(",", ":"))
    header = sign(payload, secret or CONFIG["webhookSecret"], timestamp or int(time.time()))
    if secret is None and timestamp is None:
        # As the service will: Stripe's library parses and verifies it.
        stripe.Webhook.construct_event(payload, header, CONFIG["webhookSecret"])
    return payload, header


def deliver(payload, header):
    url = SETTINGS.get("webhook") or CONFIG["webhook"]
    request = urllib.request.Request(
        url,
        data=payload.encode(),
        headers={"Content-Type": "application/json; charset=utf-8", "Stripe-Signature": header},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    kind = json.loads(payload)["type"]
    with LOCK:
        DELIVERIES.append({"type": kind, "url": url, "status": status, "body": text})
    return status, text


def error(handler, status, message, kind="invalid_request_error", param=None):
    body = {"error": {"type": kind, "message": message}}
    if param:
        body["error"]["param"] = param
    handler.answer(status, body)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        is_html = isinstance(body, str)
        self.send_header("Content-Type", "text/html; charset=utf-8" if is_html else "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length).decode()

    def authorized(self):
        if self.headers.get("Authorization") != "Bearer " + CONFIG["secretKey"]:
            error(self, 401, "Invalid API Key provided")
            return False
        return True

    def do_GET(self):
        parsed = urllib.parse.urlparse(self.path)
        path = parsed.path
        if path == "/v1/checkout/sessions":
            with LOCK:
                REQUESTS.append({"method": "GET", "path": self.path,
                                 "authorization": self.headers.get("Authorization")})
            if not self.authorized():
                return
            query = dict(urllib.parse.parse_qsl(parsed.query))
            with LOCK:
                found = [public(s) for s in SESSIONS.values()
                         if s["payment_intent"] == query.get("payment_intent")]
            return self.answer(200, {"object": "list", "data": found[:1], "has_more": False,
                                     "url": "/v1/checkout/sessions"})
        if path.startswith("/v1/checkout/sessions/"):
            with LOCK:
                REQUESTS.append({"method": "GET", "path": path,
                                 "authorization": self.headers.get("Authorization")})
            if not self.authorized():
                return
            session = SESSIONS.get(path.rsplit("/", 1)[1])
            if session is None:
                return error(self, 404, "No such checkout.session", param="session")
            return self.answer(200, session)
        if path.startswith("/pay/"):
            session = SESSIONS.get(path.rsplit("/", 1)[1])
            if session is None:
                return self.answer(404, "<p>No such payment</p>")
            amount = f"{session['amount_total'] / 100:.2f}"
            page = (
                "<!doctype html><html><head><title>Stand-in checkout</title></head><body>"
                f"<h1>Pay {amount} USD</h1>"
                f"<p id=\"product\">{html.escape(session['_name'])}</p>"
                f"<form method=\"post\" action=\"/pay/{session['id']}\">"
                f"<button id=\"pay\" type=\"submit\">Pay {amount} USD</button></form>"
                f"<p><a id=\"cancel\" href=\"{html.escape(session['cancel_url'])}\">Cancel</a></p>"
                "</body></html>"
            )
            return self.answer(200, page)
        if path == "/test/requests":
            with LOCK:
                return self.answer(200, REQUESTS)
        if path == "/test/deliveries":
            with LOCK:
                return self.answer(200, DELIVERIES)
        self.answer(404, {"error": {"message": "Unrecognized request URL"}})

    def do_POST(self):
        path = urllib.parse.urlparse(self.path).path
        if path == "/v1/checkout/sessions":
            return self.create_session()
        if path.startswith("/pay/"):
            return self.pay(path.rsplit("/", 1)[1])
        if path == "/test/event":
            ask = json.loads(self.body())
            session = dict(SESSIONS[ask["session"]])
            if ask.get("claimPaid"):
                session["payment_status"] = "paid"
            payload, header = event(ask["type"], public(session), ask.get("timestamp"), ask.get("secret"))
            return self.answer(200, {"payload": payload, "header": header})
        if path == "/test/refund":
            ask = json.loads(self.body())
            with LOCK:
                charge = CHARGES[ask["session"]]
                charge["amount_refunded"] += ask["amount"]
                charge["refunded"] = charge["amount_refunded"] == charge["amount"]
                snapshot = dict(charge)
            if ask.get("noMetadata"):
                snapshot["metadata"] = {}
            status, text = deliver(*event("charge.refunded", snapshot))
            return self.answer(200, {"status": status, "body": text})
        if path == "/test/dispute":
            ask = json.loads(self.body())
            with LOCK:
                charge = CHARGES[ask["session"]]
                dispute = {
                    "id": ask.get("dispute") or new_id("dp"), "object": "dispute",
                    "amount": charge["amount"], "charge": charge["id"], "currency": "usd",
                    "payment_intent": charge["payment_intent"], "reason": "fraudulent",
                    "status": "needs_response", "metadata": {},
                }
            payload, header = event("charge.dispute.created", dispute)
            if ask.get("signOnly"):
                return self.answer(200, {"payload": payload, "header": header,
                                         "dispute": dispute["id"]})
            status, text = deliver(payload, header)
            return self.answer(200, {"status": status, "body": text, "dispute": dispute["id"]})
        if path == "/test/session":
            ask = json.loads(self.body())
            with LOCK:
                SESSIONS[ask["session"]].update(ask["set"])
                return self.answer(200, public(SESSIONS[ask["session"]]))
        if path == "/test/config":
            SETTINGS.update(json.loads(self.body()))
            return self.answer(200, SETTINGS)
        self.answer(404, {"error": {"message": "Unrecognized request URL"}})

    def create_session(self):
        raw = self.body()
        key = self.headers.get("Idempotency-Key")
        with LOCK:
            REQUESTS.append({
                "method": "POST", "path": "/v1/checkout/sessions", "form": raw,
                "authorization": self.headers.get("Authorization"),
                "contentType": self.headers.get("Content-Type"), "idempotencyKey": key,
            })
        if not self.authorized():
            return
        if self.headers.get("Content-Type") != "application/x-www-form-urlencoded":
            return error(self, 400, "Content-Type must be application/x-www-form-urlencoded")
        if not key:
            return error(self, 400, "This stand-in wants an Idempotency-Key (postal sends one)")
        form = dict(urllib.parse.parse_qsl(raw, keep_blank_values=True, strict_parsing=True))
        with LOCK:
            if key in IDEMPOTENT:
                before, answer = IDEMPOTENT[key]
                if before != form:
                    return error(self, 400, "Keys for idempotent requests can only be used with "
                                 "the same parameters they were first used with.",
                                 kind="idempotency_error")
                return self.answer(200, answer, [("Idempotent-Replayed", "true")])
        for name in form:
            if name not in PARAMS:
                return error(self, 400, f"Received unknown parameter: {name}", param=name)
        for name in PARAMS:
            if not form.get(name):
                return error(self, 400, f"Missing required param: {name}.", param=name)
        if form["mode"] != "payment" or form["line_items[0][price_data][currency]"] != "usd":
            return error(self, 400, "Only USD payments are expected", param="mode")
        amount = form["line_items[0][price_data][unit_amount]"]
        if not amount.isdigit() or int(amount) < 50:
            return error(self, 400, "Invalid integer: " + amount, param="line_items[0][price_data][unit_amount]")
        if form["line_items[0][quantity]"] != "1":
            return error(self, 400, "Quantity must be 1", param="line_items[0][quantity]")
        for name in ("success_url", "cancel_url"):
            if not form[name].startswith(("http://", "https://")):
                return error(self, 400, "Not a valid URL", param=name)
        session_id = new_id("cs")
        session = {
            "id": session_id,
            "object": "checkout.session",
            "amount_subtotal": int(amount),
            "amount_total": int(amount),
            "cancel_url": form["cancel_url"],
            "client_reference_id": form["client_reference_id"],
            "created": int(time.time()),
            "currency": "usd",
            "expires_at": int(time.time()) + 86400,
            "livemode": False,
            "metadata": {"topup_id": form["metadata[topup_id]"],
                         "account_id": form["metadata[account_id]"]},
            "mode": "payment",
            "payment_intent": None,
            "payment_status": "unpaid",
            "status": "open",
            "success_url": form["success_url"],
            "url": SETTINGS.get("sessionUrl") or f"{BASE}/pay/{session_id}",
            "_name": form["line_items[0][price_data][product_data][name]"],
        }
        with LOCK:
            SESSIONS[session_id] = session
            IDEMPOTENT[key] = (form, public(session))
        self.answer(200, public(session))

    def pay(self, session_id):
        with LOCK:
            session = SESSIONS.get(session_id)
            if session is None:
                return self.answer(404, "<p>No such payment</p>")
            if session["payment_status"] != "paid":
                payment = new_id("pi")
                session.update(payment_status="paid", status="complete", payment_intent=payment)
                CHARGES[session_id] = {
                    "id": new_id("ch"), "object": "charge", "amount": session["amount_total"],
                    "amount_refunded": 0, "currency": "usd", "payment_intent": payment,
                    "refunded": False, "metadata": dict(session["metadata"]),
                }
            snapshot = public(session)
        if SETTINGS["deliverOnPay"]:
            deliver(*event("checkout.session.completed", snapshot))
        self.send_response(303)
        self.send_header("Location", session["success_url"])
        self.send_header("Content-Length", "0")
        self.end_headers()


def public(session):
    return {k: v for k, v in session.items() if not k.startswith("_")}


def main():
    global BASE
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    BASE = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"listening {BASE}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
