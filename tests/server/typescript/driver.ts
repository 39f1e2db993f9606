// Drives `quotaledger serve` through a client generated from its /openapi.json
// (openapi-typescript for the types, openapi-fetch for the calls): strict TypeScript
// must accept every call and answer below, or the test fails at compile time.
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";

const base = process.argv[2];
const client = createClient<paths>({ baseUrl: base });
const results: Record<string, unknown> = {};

function must<T>(what: string, data: T | undefined, error: unknown): T {
  if (data === undefined) throw new Error(`${what}: ${JSON.stringify(error)}`);
  return data;
}

const configured = await client.POST("/v1/configure", {
  body: { goal: "ts", max_active_cases: 2, quota_tpm: 100000 },
});
results.configure = must("configure", configured.data, configured.error).appended;

// A retry after a timeout: the same request_id counts once (SPEC §11).
const observation = {
  goal: "ts", uncached_input: 1200, cached_input: 0, output: 300, request_id: "chatcmpl-ts1",
};
const first = await client.POST("/v1/observe", { body: observation });
results.observe = must("observe", first.data, first.error).event?.seq;
const retried = await client.POST("/v1/observe", { body: observation });
const again = must("observe again", retried.data, retried.error);
results.retry = { seq: again.event?.seq, idempotent: again.idempotent };

const admitted: boolean[] = [];
for (const run of ["a", "b", "c"]) {
  const answer = await client.POST("/v1/admit", {
    body: { goal: "ts", run, arm: "baseline", forecast_tpm: 1000 },
  });
  const decision = must("admit", answer.data, answer.error);
  admitted.push(decision.admitted);
  results.exit_code = answer.response.headers.get("quotaledger-exit-code");
  if (!decision.admitted) results.refusal_seq = decision.event?.seq;
}
results.admitted = admitted;

const released = await client.POST("/v1/release", { body: { goal: "ts", run: "a" } });
results.release = must("release", released.data, released.error).ok;

const inspected = await client.GET("/v1/inspect", { params: { query: { goal: "ts" } } });
const goals = must("inspect", inspected.data, inspected.error).goals ?? {};
results.active = Object.keys(goals).length;

const audited = await client.GET("/v1/audit", {
  params: { query: { seq: results.refusal_seq as number } },
});
results.reproduced = must("audit", audited.data, audited.error).reproduced;

// Prices and a spend cap (SPEC §12.4): a typed price set, the prices, the goal's spend.
const priced = await client.POST("/v1/price_set", {
  body: { model: "ts-model", input_usd_per_mtok: 2.5, output_usd_per_mtok: 10 },
});
results.price_seq = must("price_set", priced.data, priced.error).event?.seq;
const prices = await client.GET("/v1/prices", {});
results.cached_price = must("prices", prices.data, prices.error).prices["ts-model"]
  ?.cached_input_usd_per_mtok;
const spend = goals["ts"]?.spend;
results.spend_usd = spend === undefined ? null : spend.usd;

// Pools (SPEC §12.1): a pool, two members, a pooled admission and the pool's figures.
const pool = await client.POST("/v1/pool_configure", {
  body: { pool: "ts-pool", quota_tpm: 1000, target_tpm: 1000 },
});
results.pool_seq = must("pool_configure", pool.data, pool.error).event?.seq;
const joinedA = await client.POST("/v1/configure", {
  body: { goal: "ts-a", pool: "ts-pool", pool_share: 0.5 },
});
must("configure", joinedA.data, joinedA.error);
const joinedB = await client.POST("/v1/configure", {
  body: { goal: "ts-b", pool: "ts-pool", pool_share: 0.5, pool_lending_limit: 0.1 },
});
must("configure", joinedB.data, joinedB.error);
const pooled = await client.POST("/v1/admit", {
  body: { goal: "ts-a", run: "p1", forecast_tpm: 600 },
});
results.pool_headroom = must("admit", pooled.data, pooled.error).receipt?.pool?.dimensions
  ?.tpm?.headroom;
const guarded = await client.POST("/v1/admit", {
  body: { goal: "ts-a", run: "p2", forecast_tpm: 1 },
});
results.pool_reasons = guarded.data?.reasons;
const listed = await client.GET("/v1/pools", {});
results.pool_borrowed = must("pools", listed.data, listed.error).pools["ts-pool"]?.members[
  "ts-a"
]?.dimensions["tpm"]?.borrowed;

// A pool's spend cap (SPEC §12.4): reached, with figures.pool.spend and the pool's spend.
const capped = await client.POST("/v1/pool_configure", {
  body: { pool: "ts-pool", cap_tokens: 0 },
});
must("pool_configure", capped.data, capped.error);
const stopped = await client.POST("/v1/admit", {
  body: { goal: "ts-b", run: "p3", forecast_tpm: 1 },
});
results.pool_cap_reasons = stopped.data?.reasons;
results.pool_cap_spent = stopped.data?.figures?.pool?.spend?.tokens?.spent;
const spent = await client.GET("/v1/pools", {});
results.pool_spend_cap = must("pools", spent.data, spent.error).pools["ts-pool"]?.spend
  .cap_tokens;

const bad = await client.POST("/v1/admit", {
  body: { goal: "ts", run: "bad run!", arm: "baseline", forecast_tpm: 1 },
});
results.bad_status = bad.response.status;
results.bad_code = bad.error && "error" in bad.error ? bad.error.error.code : null;

process.stdout.write(JSON.stringify(results) + "\n");
