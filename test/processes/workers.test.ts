import { get } from "node:http";
import { describe, expect, it } from "vitest";
import { createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import { startService, useProgramRoot } from "#test/support/processes.js";

/** The loader's bound configuration revision, each call on a new connection (so on any worker). */
function loaderRevision(gatewayUrl: string, publicId: string) {
  return new Promise<{ revision: number; worker: string }>((resolve, reject) => {
    const url = `${gatewayUrl}/loader/${publicId}.js`;
    get(url, { agent: false, headers: { "accept-encoding": "identity" } }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        body += chunk;
      });
      response.on("end", () => {
        const config = JSON.parse(/\}\)\((\{.*\})\);\n$/s.exec(body)?.[1] ?? "null");
        resolve({ revision: config?.revision, worker: String(response.socket?.remotePort) });
      });
    }).on("error", reject);
  });
}

/** npm start with CONSENT_WORKERS=2: one service to clients, one loader truth after a publish. */
describe("npm start with two workers", () => {
  const dirs = useProgramRoot("consent-workers-");

  it("serves a publish from every worker's loader at once", async () => {
    const { program, service } = await startService(dirs.join("data"), {
      CONSENT_WORKERS: "2",
    });
    const { key } = await mintKey(service, await createTeam(service, "business"));
    const { id, publicId } = await createBanner(service, key);
    // Twenty new connections: the primary hands them to both workers, which cache revision 1.
    const before = await Promise.all(
      Array.from({ length: 20 }, () => loaderRevision(service.gatewayUrl, publicId)),
    );
    expect(new Set(before.map((answer) => answer.revision))).toEqual(new Set([1]));

    await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { position: "top" } },
    });
    const published = await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
    expect(published.status).toBe(200);
    // The relay is a message between processes: allow it a moment, never the 30 s cache bound.
    let after: { revision: number }[] = [];
    for (let attempt = 0; attempt < 20; attempt++) {
      after = await Promise.all(
        Array.from({ length: 20 }, () => loaderRevision(service.gatewayUrl, publicId)),
      );
      if (after.every((answer) => answer.revision === 2)) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(new Set(after.map((answer) => answer.revision))).toEqual(new Set([2]));
    expect(await program.stop()).toBe(0);
  });
});
