import { request } from "node:http";

/** The bytes a visitor's browser downloads for the banner on first visit, per encoding. */
export interface LoaderSize {
  url: string;
  identity: number;
  gzip: number;
  brotli: number;
}

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
 * configuration in one response, measured raw, gzip and brotli.
 */
export async function measureLoader(gatewayUrl: string, publicId: string): Promise<LoaderSize> {
  const url = `${gatewayUrl}/loader/${publicId}.js`;
  return {
    url: `/loader/${publicId}.js`,
    identity: await wireBytes(url, "identity"),
    gzip: await wireBytes(url, "gzip"),
    brotli: await wireBytes(url, "br"),
  };
}
