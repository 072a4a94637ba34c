import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Histogram } from "autocannon";
import { v7 as uuidv7 } from "uuid";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import { histogram, openLoop } from "./paced.js";

/** The disk's floor under the log route: the embedded store's durable append, alone (ms). */
export interface CommitLatency {
  /** One append after the other, each awaited: one commit (and its fsync) per append. */
  sequential: Histogram;
  /** One append issued every millisecond (1,000/s), as the log route sees at its target rate. */
  paced: Histogram;
}

const SEQUENTIAL_APPENDS = 500;
const PACED_RATE = 1_000;
const PACED_SECONDS = 2;

const summary = (latencies: number[]) => histogram(latencies.toSorted((a, b) => a - b));

/** A row the size of the benchmark's log posts, as the consent-log service stores it. */
function row(teamId: string): ConsentLogRecord {
  const now = new Date();
  return {
    id: uuidv7(),
    teamId,
    bannerId: randomUUID(),
    publicId: randomUUID(),
    consentId: randomUUID(),
    method: "consent_given",
    preferences: { necessary: true, analytics: true, marketing: false },
    revision: 1,
    languageCode: "en",
    gpc: false,
    pageUrl: "https://shop.example.com",
    occurredAt: now,
    timestampClamped: false,
    receivedAt: now,
  };
}

/**
 * Appends consent-log rows to a fresh embedded store in `parent` (the benchmark's temp directory,
 * so the same disk as the service's data) through the store's own append, durable when its
 * promise resolves (daemon/store/lmdb-store.ts). No HTTP, no service: what the disk alone costs
 * the log route, whose answer waits for this commit (decisions §5: durable before the 200).
 */
export async function measureCommitLatency(parent = os.tmpdir()): Promise<CommitLatency> {
  const dataDir = await mkdtemp(path.join(parent, "consent-commit-"));
  const store = await openLmdbStore({ dataDir });
  try {
    const teamId = randomUUID();
    for (let i = 0; i < 50; i++)
      await store.consentLog.append(row(teamId), { event: "consent.given" });
    const sequential: number[] = [];
    for (let i = 0; i < SEQUENTIAL_APPENDS; i++) {
      const started = performance.now();
      await store.consentLog.append(row(teamId), { event: "consent.given" });
      sequential.push(performance.now() - started);
    }
    // Open loop, as the paced scenario sends: each append's latency counts from its scheduled
    // time, so a stalled commit delays the appends queued behind it as it would the answers.
    const paced: number[] = [];
    await openLoop(PACED_RATE, PACED_RATE * PACED_SECONDS, async (scheduledAt) => {
      await store.consentLog.append(row(teamId), { event: "consent.given" });
      paced.push(performance.now() - scheduledAt);
    });
    return { sequential: summary(sequential), paced: summary(paced) };
  } finally {
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** One line for the benchmark's report. */
export function describeCommitLatency({ sequential, paced }: CommitLatency): string {
  const figures = (s: Histogram) => `p50 ${s.p50} ms, p99 ${s.p99} ms, max ${s.max} ms`;
  return `Durable append alone (the embedded store, no HTTP; the log route's floor): one at a time ${figures(sequential)}; 1,000/s ${figures(paced)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${describeCommitLatency(await measureCommitLatency())}\n`);
}
