import { type AddressInfo, createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { StartupError } from "#daemon/config.js";
import { openMongoStore } from "#daemon/store/mongo-store.js";
import {
  emptyDatabase,
  type StandInKind,
  startWireStandIn,
  type WireStandIn,
} from "#daemon/store/mongo-wire-stand-in.js";

/**
 * A start against a deployment moved between a standalone server and a replica set, over a
 * wire-protocol stand-in (mongo-wire-stand-in.ts) whose handshake says which it is, and a
 * MONGODB_URI that names a replica set (`replicaSet=`), a server alone (`directConnection=true`),
 * or neither (the driver finds out which).
 */

let server: WireStandIn | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** The stand-in's address. */
let host = "";

/** How a start with MONGODB_URI ending in `options` goes against a server of `kind`. */
async function start(kind: StandInKind, options: string) {
  const database = emptyDatabase();
  server = await startWireStandIn((command, name) => database.answer(command, name), kind);
  host = new URL(server.uri("shop")).host;
  const started = performance.now();
  const outcome = await openMongoStore({
    uri: `mongodb://${host}/shop${options}`,
    timeoutMs: 1_000,
  }).then(
    async (store) => {
      await store.close();
      return "started";
    },
    (error: unknown) => error,
  );
  return { outcome, elapsed: performance.now() - started };
}

/** The one line a start that stops prints (a StartupError's message). */
function lineOf(outcome: unknown): string {
  expect(outcome).toBeInstanceOf(StartupError);
  const message = (outcome as StartupError).message;
  expect(message).not.toContain("\n");
  return message;
}

describe("MongoDB store: a start against a server that is not the deployment MONGODB_URI names", () => {
  it("says a server restarted standalone under replicaSet= is one, and what to do, within the selection bound", async () => {
    const { outcome, elapsed } = await start({ standalone: true }, "?replicaSet=rs0");
    expect(lineOf(outcome)).toBe(
      `MongoDB at ${host} is a standalone server, but MONGODB_URI names the replica set rs0 (replicaSet=rs0): restart it with --replSet rs0 (a member run standalone for maintenance must not take the service's writes), or, if it is to run standalone from now on, name it alone in MONGODB_URI without replicaSet`,
    );
    // The test's 1 s bound, not the default 10 s: room left for a loaded machine.
    expect(elapsed).toBeLessThan(8_000);
  });

  it("says a server restarted with --replSet but never initiated needs rs.initiate(), found by the driver or reached directly", async () => {
    const line = (address: string) =>
      `MongoDB at ${address} runs as a replica set member (--replSet) whose set has not been initiated: run rs.initiate() in mongosh on it (once, on one member), or restart it without --replSet, then start again`;
    const found = await start({ uninitiated: true }, "");
    expect(lineOf(found.outcome)).toBe(line(host));
    await server?.close();
    const direct = await start({ uninitiated: true }, "?directConnection=true");
    expect(lineOf(direct.outcome)).toBe(line(host));
    // It stopped before reading or writing anything of the service's.
    expect(server?.commands.map((command) => Object.keys(command)[0])).toEqual([]);
  });

  it("names the set a member belongs to when MONGODB_URI names another", async () => {
    const { outcome } = await start({ setName: "rs1" }, "?replicaSet=rs0");
    expect(lineOf(outcome)).toBe(
      `MongoDB at ${host} is a member of the replica set rs1, but MONGODB_URI names rs0 (replicaSet=rs0): set replicaSet=rs1 in MONGODB_URI, or name the members of rs0 in it`,
    );
  });

  it("says a set whose members answer without a primary has none, rather than that it cannot be reached", async () => {
    const { outcome } = await start({ secondary: true }, "?replicaSet=rs0");
    expect(lineOf(outcome)).toBe(
      `MongoDB replica set rs0 has no primary within 1 s: its members at ${host} answer, none as primary (an election under way, or too few members up to elect one); start again once one is primary`,
    );
  });

  it("says a set whose members name a primary it cannot reach has one, not that an election is under way", async () => {
    // The set's configuration names its primary by an address that does not answer from here
    // (a container's name, a closed port): the set has a primary, this start cannot reach it.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const primary = `127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    const { outcome } = await start({ secondary: true, primary }, "?replicaSet=rs0");
    const line = lineOf(outcome);
    expect(line).toMatch(
      new RegExp(
        `^MongoDB replica set rs0 names ${primary} as its primary \\(so say its members at ${host}\\), but ${primary} did not answer within 1 s: connect ECONNREFUSED ${primary}; the service reaches each member at the address the set's configuration gives it \\(rs\\.conf\\(\\)\\), so ${primary} must resolve and be reachable from here$`,
      ),
    );
    expect(line).not.toContain("election");
  });

  it("still says a server that does not answer could not be reached", async () => {
    const { outcome } = await start({}, "?replicaSet=rs0");
    expect(outcome).toBe("started");
    await server?.close();
    const closed = await openMongoStore({
      uri: `mongodb://${host}/shop?replicaSet=rs0`,
      timeoutMs: 1_000,
    }).catch((error: unknown) => error);
    expect(lineOf(closed)).toMatch(
      new RegExp(`^MongoDB server could not be reached at ${host} within 1 s: `),
    );
  });
});

describe("MongoDB store: a start after the deployment moved between a standalone server and a replica set", () => {
  it.each<[string, StandInKind, string]>([
    ["a standalone server, named alone", { standalone: true }, ""],
    ["a standalone server, reached directly", { standalone: true }, "?directConnection=true"],
    ["a replica set, found by the driver", {}, ""],
    ["a replica set, named", {}, "?replicaSet=rs0"],
  ])("starts on %s", async (_, kind, options) => {
    expect((await start(kind, options)).outcome).toBe("started");
  });
});
