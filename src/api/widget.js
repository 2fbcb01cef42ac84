/* postal checkout widget: fills city and region from the postal code a shopper types, offers
 * the places when a code has several, and flags a city that does not belong to the code.
 * No dependencies. Served by postal at GET /widget.js (docs/browser.md).
 *
 *   <script src="https://postal.example/widget.js" data-key="pub_..." data-country="FR" defer></script>
 *   <form>
 *     <input data-postal="zipcode"> <input data-postal="city"> <input data-postal="state">
 *     <select data-postal="country">...</select>   (optional: else data-country, else US)
 *     <output data-postal="status"></output>        (optional: what the widget says)
 *   </form>
 *
 * Each form (or the page, for fields outside a form) gets `data-postal-state`
 * ("filled", "choose", "conflict", "unknown", "error"; `data-postal-error` holds the
 * status of a refusal: 403, 429...) and, once the city is checked,
 * `data-postal-verdict` ("match", "fuzzy_match", "conflict", "not_found"); a conflicting
 * city gets aria-invalid="true". A `postal:result` event carries each answer.
 * Requests: GET /api/places (no preflight) and POST /api/verify sent as text/plain (a
 * "simple request" too: postal reads the body as JSON whatever its Content-Type). */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script) return;
  var key = script.getAttribute("data-key") || "";
  var base = new URL(script.src, location.href).origin;
  var fallbackCountry = script.getAttribute("data-country") || "US";
  var delay = Number(script.getAttribute("data-delay") || 250);
  var lists = 0;

  function field(scope, name) {
    return scope.querySelector('[data-postal="' + name + '"]');
  }

  function say(scope, state, text) {
    scope.setAttribute("data-postal-state", state);
    var out = field(scope, "status");
    if (out) out.textContent = text;
  }

  function parse(response) {
    return response.json().then(function (body) {
      if (response.ok) return body;
      var error = new Error(body.error || "HTTP " + response.status);
      error.status = response.status;
      error.retryAfter = response.headers.get("Retry-After");
      throw error;
    });
  }

  function get(path, params) {
    params.key = key;
    var query = Object.keys(params).map(function (name) {
      return encodeURIComponent(name) + "=" + encodeURIComponent(params[name]);
    });
    return fetch(base + path + "?" + query.join("&")).then(parse);
  }

  function post(path, body) {
    body.apiKey = key;
    return fetch(base + path, {
      method: "POST",
      headers: { "Content-Type": "text/plain" },
      body: JSON.stringify(body),
    }).then(parse);
  }

  function tell(scope, detail) {
    scope.dispatchEvent(new CustomEvent("postal:result", { detail: detail, bubbles: true }));
  }

  function failed(scope, error) {
    var text = error.message;
    if (error.retryAfter) text += " (retry in " + error.retryAfter + " s)";
    scope.setAttribute("data-postal-error", String(error.status || ""));
    say(scope, error.status === 404 ? "unknown" : "error", text);
    tell(scope, { error: error.message, status: error.status, retryAfter: error.retryAfter });
  }

  function attach(scope) {
    var zipcode = field(scope, "zipcode");
    var city = field(scope, "city");
    var state = field(scope, "state");
    if (!zipcode) return;
    var timer = null;
    var asked = 0;
    var list = null;
    if (city) {
      list = document.createElement("datalist");
      list.id = "postal-places-" + ++lists;
      city.setAttribute("list", list.id);
      city.parentNode.insertBefore(list, city.nextSibling);
    }

    function country() {
      var chosen = field(scope, "country");
      return (chosen && chosen.value) || fallbackCountry;
    }

    function lookUp() {
      var code = zipcode.value.trim();
      if (code.length < 2) return;
      var mine = ++asked;
      scope.removeAttribute("data-postal-error");
      get("/api/places", { zipcode: code, country: country() }).then(function (body) {
        if (mine !== asked) return;
        var names = [];
        body.places.forEach(function (place) {
          if (names.indexOf(place.city) < 0) names.push(place.city);
        });
        if (list) {
          list.textContent = "";
          names.forEach(function (name) {
            var option = document.createElement("option");
            option.value = name;
            list.appendChild(option);
          });
        }
        if (state && body.places[0].state) state.value = body.places[0].state;
        if (names.length === 1) {
          if (city) city.value = names[0];
          say(scope, "filled", names[0]);
        } else {
          say(scope, "choose", names.length + " places: " + names.join(", "));
        }
        tell(scope, { places: body.places });
        if (city && city.value) check();
      }, function (error) {
        if (mine === asked) failed(scope, error);
      });
    }

    function check() {
      var code = zipcode.value.trim();
      var typed = city.value.trim();
      if (!code || !typed) return;
      var request = { zipcode: code, city: typed, country: country() };
      if (state && state.value.trim()) request.state = state.value.trim();
      post("/api/verify", request).then(function (body) {
        scope.setAttribute("data-postal-verdict", body.result);
        city.setAttribute("aria-invalid", body.result === "conflict" ? "true" : "false");
        if (body.result === "fuzzy_match") {
          say(scope, "filled", "Did you mean " + body.matchedCity + "?");
        } else if (body.result === "conflict") {
          var names = body.places.map(function (place) { return place.city; });
          say(scope, "conflict", typed + " is not at " + code + ": " + names.join(", "));
        }
        tell(scope, { verdict: body });
      }, function (error) {
        failed(scope, error);
      });
    }

    zipcode.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(lookUp, delay);
    });
    if (city) city.addEventListener("change", check);
  }

  function start() {
    var scopes = [];
    document.querySelectorAll('[data-postal="zipcode"]').forEach(function (input) {
      var scope = input.form || document.documentElement;
      if (scopes.indexOf(scope) < 0) scopes.push(scope);
    });
    scopes.forEach(attach);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
