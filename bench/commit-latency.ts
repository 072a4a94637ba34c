import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { v7 as uuidv7 } from "uuid";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";

/** Latency figures of one series of appends, in milliseconds. */
export interface LatencySummary {
  appends: number;
  p50: number;
  p99: number;
  max: number;
}

/** The disk's floor under the log route: the embedded store's durable append, alone. */
export interface CommitLatency {
  /** One append after the other, each awaited: one commit (and its fsync) per append. */
  sequential: LatencySummary;
  /** One append issued every millisecond (1,000/s), as the log route sees at its target rate. */
  paced: LatencySummary;
}

const SEQUENTIAL_APPENDS = 500;
const PACED_SECONDS = 2;

function summary(latencies: number[]): LatencySummary {
  const sorted = latencies.toSorted((a, b) => a - b);
  const at = (share: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * share))] ?? 0;
  const round = (ms: number) => Math.round(ms * 100) / 100;
  return {
    appends: sorted.length,
    p50: round(at(0.5)),
    p99: round(at(0.99)),
    max: round(sorted.at(-1) ?? 0),
  };
}

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
 * the log route, whose answer waits for this commit (issue 3, item 1).
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
    // Open loop: each append's latency counts from its scheduled time, so a stalled commit
    // delays the appends queued behind it as it would delay the route's answers.
    const paced: Promise<number>[] = [];
    const start = performance.now();
    const total = PACED_SECONDS * 1000;
    while (paced.length < total) {
      const due = start + paced.length;
      const now = performance.now();
      if (now < due) {
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - now)));
        continue;
      }
      while (paced.length < total && start + paced.length <= performance.now()) {
        const scheduled = start + paced.length;
        paced.push(
          store.consentLog
            .append(row(teamId), { event: "consent.given" })
            .then(() => performance.now() - scheduled),
        );
      }
    }
    return { sequential: summary(sequential), paced: summary(await Promise.all(paced)) };
  } finally {
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** One line for the benchmark's report. */
export function describeCommitLatency({ sequential, paced }: CommitLatency): string {
  const figures = (s: LatencySummary) => `p50 ${s.p50} ms, p99 ${s.p99} ms, max ${s.max} ms`;
  return `Durable append alone (the embedded store, no HTTP; the log route's floor): one at a time ${figures(sequential)}; 1,000/s ${figures(paced)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${describeCommitLatency(await measureCommitLatency())}\n`);
}
