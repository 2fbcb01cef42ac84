//! The HTTP API: poem + poem-openapi, exact to `postal-api.md`.
