import { randomUUID } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { Document } from "mongodb";
import { afterEach, describe, expect, it } from "vitest";
import { CALL_TIMEOUT_MS } from "#cli/daemon-client.js";
import { runCli } from "#cli/test-support/cli-process.js";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { lowestIdAt } from "#daemon/consent-log/consent-log-rules.js";
import { cursorReply, emptyDatabase } from "#daemon/store/mongo-wire-stand-in.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import {
  failureOf,
  type StandInDaemon,
  startStandInDaemon,
} from "#test/support/stand-in-daemon.js";

/**
 * The operator's reads of the consent log over gRPC, served by a daemon over the MongoDB adapter
 * and a wire-protocol stand-in for the server (mongo-wire-stand-in.ts): the queries it sends for
 * a time range, and its answer when the server stops such a read at its time limit, which a real
 * server does only for a log larger than a test can write.
 */

const operatorToken = generateOperatorToken();
const teamId = randomUUID();
const since = new Date("2026-04-01T00:00:00.000Z");
const until = new Date("2026-04-08T00:00:00.000Z");

/** MongoDB's answer to a read it stopped at its maxTimeMS. */
const STOPPED = {
  ok: 0,
  code: 50,
  codeName: "MaxTimeMSExpired",
  errmsg: "operation exceeded time limit",
};

let running: StandInDaemon | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

/**
 * A daemon over a database holding one team, on a free port, with CONSENT_MONGODB_TIMEOUT_MS at
 * `timeoutMs` (1 s by default); `logs` gathers what it logs at warn and above. With
 * `answerLogReads`, the server answers every read of the team's log rows so.
 */
async function startDaemon(
  options: { answerLogReads?: () => Document | Promise<Document>; timeoutMs?: number } = {},
) {
  const { answerLogReads } = options;
  const database = emptyDatabase(undefined, {
    find: (command) =>
      answerLogReads && isLogRead(command, "find")
        ? answerLogReads()
        : cursorReply(`${command.$db}.${command.find}`, database.documents.get(command.find) ?? []),
    aggregate: (command) =>
      answerLogReads && isLogRead(command, "aggregate")
        ? answerLogReads()
        : cursorReply(`${command.$db}.${command.aggregate}`, []),
    // Only a cursor answerLogReads left open is read on: its next batch is a read stopped late.
    getMore: () => STOPPED,
  });
  const now = new Date();
  database.documents.set("teams", [
    { _id: teamId, name: "Acme", plan: "free", createdAt: now, updatedAt: now },
  ]);
  running = await startStandInDaemon(database, { operatorToken, timeoutMs: options.timeoutMs });
  const { daemonUrl, logs } = running;
  const client = createClient(ConsentLogService, createGrpcTransport({ baseUrl: daemonUrl }));
  return { client, logs, daemonUrl };
}

/** Whether a command reads the team's log rows (a find's filter, an aggregate's first $match). */
function isLogRead(command: Document, name: string): boolean {
  return (
    command[name] === "consent_log" &&
    (command.filter?.teamId ?? command.pipeline?.[0]?.$match?.teamId) === teamId
  );
}

const asOperator = {
  headers: { authorization: `Bearer ${operatorToken}`, "consent-team": teamId },
};

/** The commands that read the team's log rows, as the server received them. */
function logReads(name: "find" | "aggregate"): Document[] {
  return (running?.server.commands ?? []).filter((command) => isLogRead(command, name));
}

async function drain(stream: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of stream);
}

describe("consent log reads of a time range over MongoDB", () => {
  it("start from `since` in the index: list, export and stats bound _id below by since's millisecond", async () => {
    const { client } = await startDaemon();
    const range = { since: timestampFromDate(since), until: timestampFromDate(until) };
    await client.listConsentLogs(range, asOperator);
    await drain(client.exportConsentLogs({ since: range.since }, asOperator));
    await client.consentLogStats(range, asOperator);
    const lowest = lowestIdAt(since.getTime());
    const [listed, newest, exported] = logReads("find");
    expect(listed?.filter).toEqual({
      teamId,
      receivedAt: { $gte: since, $lt: until },
      _id: { $gte: lowest },
    });
    expect(listed?.sort).toEqual({ _id: -1 });
    // The export reads up to the moment it began, or past the team's newest row (read first):
    // `until` filters rows, never ids.
    expect(newest?.filter).toEqual({ teamId });
    expect([newest?.sort, newest?.limit]).toEqual([{ _id: -1 }, 1]);
    expect(exported?.filter).toMatchObject({ teamId, _id: { $gte: lowest } });
    expect(exported?.filter._id).toEqual({ $gte: lowest });
    const [counted] = logReads("aggregate");
    expect(counted?.pipeline[0].$match).toEqual({
      teamId,
      receivedAt: { $gte: since, $lt: until },
      _id: { $gte: lowest },
    });
  });

  it("selects one consent record by equality on consentId, the prefix of consent_log_by_consent_id", async () => {
    const { client } = await startDaemon();
    const consentId = randomUUID();
    await client.listConsentLogs({ consentId: consentId.toUpperCase() }, asOperator);
    await drain(client.exportConsentLogs({ consentId }, asOperator));
    await client.consentLogStats({ consentId }, asOperator);
    const [listed, , exported] = logReads("find");
    expect(listed?.filter).toEqual({ teamId, consentId });
    expect(listed?.sort).toEqual({ _id: -1 });
    expect(exported?.filter).toMatchObject({ teamId, consentId });
    const [counted] = logReads("aggregate");
    expect(counted?.pipeline[0].$match).toEqual({ teamId, consentId });
  });

  it("answers a range the server stopped at its time limit with failed_precondition query_too_broad, saying how to narrow it, and logs no outage", async () => {
    const { client, logs } = await startDaemon({ answerLogReads: () => STOPPED });
    const range = { since: timestampFromDate(since) };
    const narrow = {
      code: Code.FailedPrecondition,
      errorCode: "query_too_broad",
      message:
        "The query passes over more of the team's consent log than the store reads within its limit of 1 s a read; narrow its time range (since, until) or name a banner",
      retryAfter: null,
    };
    expect(await failureOf(client.listConsentLogs(range, asOperator))).toEqual(narrow);
    expect(await failureOf(client.consentLogStats(range, asOperator))).toEqual(narrow);
    expect(await failureOf(drain(client.exportConsentLogs(range, asOperator)))).toEqual(narrow);
    // Each read was sent once: the driver does not retry a read the server stopped.
    expect(logReads("find")).toHaveLength(2);
    expect(logReads("aggregate")).toHaveLength(1);
    expect(logs).toEqual([]);
  });

  it("answers query_too_broad also when the server stops the read in a later batch (getMore)", async () => {
    // The time limit counts over the whole cursor: a first batch can come back before it passes.
    const { client, logs } = await startDaemon({
      answerLogReads: () => cursorReply("shop.consent_log", [], 7),
    });
    const range = { since: timestampFromDate(since) };
    for (const call of [
      client.listConsentLogs({ ...range, pageSize: 500 }, asOperator),
      client.consentLogStats(range, asOperator),
    ]) {
      expect(await failureOf(call)).toMatchObject({
        code: Code.FailedPrecondition,
        errorCode: "query_too_broad",
        retryAfter: null,
      });
    }
    const readOn = (running?.server.commands ?? []).filter((command) => "getMore" in command);
    expect(readOn.map((command) => command.collection)).toEqual(["consent_log", "consent_log"]);
    expect(logs).toEqual([]);
  });

  it("answers a tail whose read of its latest rows the server stopped with unavailable and Retry-After", async () => {
    const { client } = await startDaemon({ answerLogReads: () => STOPPED });
    const tail = client.tailConsentLogs({}, asOperator);
    expect(await failureOf(drain(tail))).toMatchObject({
      code: Code.Unavailable,
      errorCode: "unavailable",
      retryAfter: "5",
    });
  });

  it("reaches consentctl logs list and logs stats when the server takes longer than a call's own limit to stop the read", async () => {
    // A server that stops the read only after the CLI's limit of a single call has passed.
    const { daemonUrl } = await startDaemon({
      timeoutMs: CALL_TIMEOUT_MS + 2_000,
      answerLogReads: () =>
        new Promise((resolve) => setTimeout(resolve, CALL_TIMEOUT_MS + 500, STOPPED)),
    });
    const connection = ["--team", teamId, "--since", "30d", "--daemon", daemonUrl, "--json"];
    const runs = await Promise.all(
      ["list", "stats"].map((command) =>
        runCli(["logs", command, ...connection], { env: { CONSENT_ADMIN_TOKEN: operatorToken } }),
      ),
    );
    for (const run of runs) {
      expect(run.code).toBe(1);
      expect(JSON.parse(run.stderr)).toMatchObject({
        code: "query_too_broad",
        error: expect.stringMatching(/^The query passes over more .* or name a banner\.$/),
      });
    }
  }, 60_000);
});
