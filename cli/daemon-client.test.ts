import { type AddressInfo, createServer, type Socket } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDaemonClient } from "#cli/daemon-client.js";
import { createTeam } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** The CLI's client against a real daemon: the time limit of calls and of streams. */
describe("the CLI's daemon client", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.close());

  // Regression: a tail or an export was cut after the 10 s limit of a single call.
  it("follows a stream past the time limit of a call, and still limits a call", async () => {
    const callTimeoutMs = 300;
    const client = createDaemonClient({
      url: service.daemonUrl,
      token: service.operatorToken,
      callTimeoutMs,
    });
    try {
      const teamId = await createTeam(service);
      const abort = new AbortController();
      const tail = client
        .logs(teamId, { untimed: true })
        .tailConsentLogs({}, { signal: abort.signal })
        [Symbol.asyncIterator]();
      expect((await tail.next()).value?.entries).toEqual([]);
      const outcome = Promise.race([
        tail.next().then(
          () => "a message",
          (error: unknown) => `failed: ${String(error)}`,
        ),
        new Promise((resolve) => setTimeout(resolve, callTimeoutMs * 4, "still following")),
      ]);
      expect(await outcome).toBe("still following");
      abort.abort();
      // A call that is not a stream keeps the limit: a stream opened through that client ends.
      const limited = client.logs(teamId).tailConsentLogs({})[Symbol.asyncIterator]();
      await limited.next();
      await expect(limited.next()).rejects.toThrow(/deadline/i);
    } finally {
      client.close();
    }
  });

  it("ends a stream whose daemon stops answering: a port that accepts and says nothing", async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const { port } = silent.address() as AddressInfo;
    const client = createDaemonClient({
      url: `http://127.0.0.1:${port}`,
      token: service.operatorToken,
      callTimeoutMs: 300,
    });
    try {
      const tail = client
        .logs("team", { untimed: true })
        .tailConsentLogs({})
        [Symbol.asyncIterator]();
      const failure = await tail.next().then(
        () => undefined,
        (error: unknown) => error,
      );
      // The words cli/problems.ts reads as "did not answer in time".
      expect(failure).toBeInstanceOf(ConnectError);
      expect([(failure as ConnectError).code, (failure as ConnectError).rawMessage]).toEqual([
        Code.Unavailable,
        "PING timed out",
      ]);
    } finally {
      client.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
