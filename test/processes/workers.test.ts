import { get } from "node:http";
import { describe, expect, it } from "vitest";
import { createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import { startService, useProgramRoot } from "#test/support/processes.js";
import { eventually } from "#test/support/webhook-receiver.js";

/** The loader's bound configuration revision, each call on a new connection (so on any worker). */
function loaderRevision(gatewayUrl: string, publicId: string) {
  return new Promise<number>((resolve, reject) => {
    const url = `${gatewayUrl}/loader/${publicId}.js`;
    get(url, { agent: false, headers: { "accept-encoding": "identity" } }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        body += chunk;
      });
      response.on("end", () => {
        const config = JSON.parse(/\}\)\((\{.*\})\);\n$/s.exec(body)?.[1] ?? "null");
        resolve(config?.revision);
      });
    }).on("error", reject);
  });
}

/** npm start with CONSENT_WORKERS=2: one service to clients, one loader truth after a publish. */
describe("npm start with two workers", { timeout: 120_000 }, () => {
  const dirs = useProgramRoot("consent-workers-");

  it("serves a publish from every worker's loader at once", async () => {
    const { program, service } = await startService(dirs.join("data"), {
      CONSENT_WORKERS: "2",
    });
    const { key } = await mintKey(service, await createTeam(service, "business"));
    const { id, publicId } = await createBanner(service, key);
    // The edit first: only the publish below is left for a worker to learn from another.
    const patched = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { position: "top" } },
    });
    expect(patched.status).toBe(200);
    // Twenty new connections: the primary hands them to both workers, which cache revision 1.
    const revisions = () =>
      Promise.all(Array.from({ length: 20 }, () => loaderRevision(service.gatewayUrl, publicId)));
    expect(new Set(await revisions())).toEqual(new Set([1]));

    const published = await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
    expect(published.status).toBe(200);
    // The relay is a message between processes: allow it a moment, well inside the loaders' 30 s
    // bound, which would otherwise be what refreshes the other worker.
    await eventually(
      async () => ((await revisions()).every((revision) => revision === 2) ? true : undefined),
      "every worker's loader serves revision 2",
      10_000,
    );
    expect(await program.stop()).toBe(0);
  });
});
