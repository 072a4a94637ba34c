import { request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";

/** The bytes a visitor's browser downloads for the banner on first visit, per encoding. */
export interface LoaderSize {
  url: string;
  identity: number;
  gzip: number;
  /** As a location is first built (a quick brotli quality): what the budget holds. */
  brotli: number;
  /** Once asked for again and recompressed at the highest quality, in the background. */
  brotliRecompressed: number;
}

/** How long the measure waits for the recompressed brotli body. */
const RECOMPRESSED_WAIT_MS = 10_000;

/** The body size of one GET as sent on the wire (node:http does not decompress, fetch would). */
function wireBytes(url: string, encoding: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { "accept-encoding": encoding } }, (response) => {
      let bytes = 0;
      response.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
      });
      response.on("end", () => {
        const served = response.headers["content-encoding"] ?? "identity";
        if (response.statusCode !== 200) reject(new Error(`${url}: ${response.statusCode}`));
        else if (served !== encoding) reject(new Error(`${url}: ${served} instead of ${encoding}`));
        else resolve(bytes);
      });
      response.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * GET /loader/{publicId}.js (decisions §6): runtime, CSS and the banner's published
 * configuration in one response, measured raw, gzip and brotli (as first built, and recompressed).
 */
export async function measureLoader(gatewayUrl: string, publicId: string): Promise<LoaderSize> {
  const url = `${gatewayUrl}/loader/${publicId}.js`;
  // Brotli first: the first request for the banner gets the first build's body.
  const brotli = await wireBytes(url, "br");
  const identity = await wireBytes(url, "identity");
  const gzip = await wireBytes(url, "gzip");
  // Asked for again, each process serving it recompresses it in the background.
  let brotliRecompressed = brotli;
  for (const started = Date.now(); Date.now() - started < RECOMPRESSED_WAIT_MS; await sleep(100)) {
    brotliRecompressed = await wireBytes(url, "br");
    if (brotliRecompressed < brotli) break;
  }
  return { url: `/loader/${publicId}.js`, identity, gzip, brotli, brotliRecompressed };
}
