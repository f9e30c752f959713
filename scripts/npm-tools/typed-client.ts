// A client typed from Meridian's own /openapi.json, for the typed-client
// test (shared/app/typed_client_test.go): openapi-typescript writes the
// document's types to ./api.d.ts beside this file, tsc compiles both in
// strict mode (tsconfig.json), and node runs the result. No casts: when
// the served document stops describing what a client reads here, the
// compilation fails.
// Usage: node typed-client.js BASE_URL API_KEY
import createClient from "openapi-fetch";
import type { paths } from "./api.js";

const [baseUrl, key] = process.argv.slice(2);
if (!baseUrl || !key) {
  throw new Error("usage: node typed-client.js BASE_URL API_KEY");
}
const client = createClient<paths>({ baseUrl, headers: { "x-api-key": key } });

// (a) A paid call.
const paid = await client.GET("/v1/company_registry/search", {
  params: { query: { query: "acme", limit: 2 } },
});
if (!paid.data) {
  throw new Error(`search: ${paid.response.status} ${JSON.stringify(paid.error)}`);
}
const found = paid.data.data;
// The operation also answers dry runs; this call is not one.
if ("dry_run" in found) {
  throw new Error(`search answered a dry run: ${JSON.stringify(found)}`);
}
const items = found.items ?? [];

// (b) An undeclared parameter. The generated types reject a misspelled
// name, so the query string is written by hand, as a caller with a typo
// in a URL would send it; the answer is still read through the types.
const typo = await client.GET("/v1/company_registry/search", {
  params: { query: { query: "acme" } },
  querySerializer: (q) => `qery=${encodeURIComponent(q.query)}`,
});
if (typo.data) {
  throw new Error(`qery was accepted: ${JSON.stringify(typo.data)}`);
}
const typoError = typo.error.error;

// (c) A batch: one valid item (limit 1, so not the cached answer of (a)
// and charged on its own) and one with an undeclared parameter.
const batch = await client.POST("/v1/batch", {
  body: {
    requests: [
      { platform: "company_registry", endpoint: "search", params: { query: "acme", limit: 1 } },
      { platform: "company_registry", endpoint: "search", params: { qery: "acme" } },
    ],
  },
});
if (!batch.data) {
  throw new Error(`batch: ${batch.response.status} ${JSON.stringify(batch.error)}`);
}

console.log(
  JSON.stringify({
    paid: {
      status: paid.response.status,
      credits_used: paid.data.credits_used,
      request_id: paid.data.request_id,
      items: items.length,
      names: items.map((item) => item.name ?? null),
    },
    typo: {
      status: typo.response.status,
      type: typoError.type,
      // Checked against the document's ErrorType enum at compile time.
      invalid_parameters: typoError.type === "INVALID_PARAMETERS",
      suggestion: typoError.details?.suggestions?.["qery"] ?? null,
      unknown_parameters: typoError.details?.unknown_parameters ?? [],
    },
    batch: {
      status: batch.response.status,
      count: batch.data.count,
      succeeded: batch.data.succeeded,
      failed: batch.data.failed,
      credits_used: batch.data.credits_used,
      results: batch.data.results.map((r) =>
        r.success
          ? { index: r.index, status: r.status, success: true, request_id: r.request_id, credits_used: r.credits_used, type: null }
          : { index: r.index, status: r.status, success: false, request_id: r.request_id, credits_used: r.credits_used, type: r.error.type },
      ),
    },
  }),
);
