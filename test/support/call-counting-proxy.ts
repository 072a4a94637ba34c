import { once } from "node:events";
import { type AddressInfo, createConnection, createServer, type Socket } from "node:net";

const PREFACE_BYTES = 24;
const FRAME_HEADER_BYTES = 9;
const HEADERS_FRAME = 0x1;

/**
 * A TCP proxy in front of a daemon's cleartext HTTP/2 port that counts the calls sent through it
 * (each a client stream opened by a HEADERS frame), whether or not the daemon answers them: a
 * daemon stopped with SIGSTOP leaves them in its socket buffers, and they are counted all the same.
 */
export async function callCountingProxy(target: string) {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  let calls = 0;
  const server = createServer((client) => {
    const upstream = createConnection({ host: hostname, port: Number(port) });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    let pending = Buffer.alloc(0);
    let prefaceLeft = PREFACE_BYTES;
    let lastStream = 0;
    client.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const skipped = Math.min(prefaceLeft, pending.length);
      prefaceLeft -= skipped;
      pending = pending.subarray(skipped);
      while (prefaceLeft === 0 && pending.length >= FRAME_HEADER_BYTES) {
        const length = pending.readUIntBE(0, 3);
        if (pending.length < FRAME_HEADER_BYTES + length) break;
        const stream = pending.readUInt32BE(5) & 0x7fffffff;
        if (pending[3] === HEADERS_FRAME && stream > lastStream) {
          lastStream = stream;
          calls++;
        }
        pending = pending.subarray(FRAME_HEADER_BYTES + length);
      }
    });
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    /** Calls sent through the proxy so far. */
    calls: () => calls,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
