import { connect } from "node:net";

/** What came back on a raw connection before the server closed it. */
export function rawExchange(port: number, send: (write: (text: string) => void) => void) {
  return new Promise<{ status: number; headers: string; body: string }>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      received += chunk;
    });
    socket.on("error", () => {}); // the server resets after answering; the answer is what counts
    socket.on("close", () => {
      const [head = "", body = ""] = received.split("\r\n\r\n");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      if (!status) reject(new Error(`no answer: ${JSON.stringify(received)}`));
      else resolve({ status, headers: head.toLowerCase(), body });
    });
    socket.on("connect", () => send((text) => socket.write(text)));
  });
}

/** A raw connection, once open, and what has come back on it so far. */
export async function rawConnection(port: number) {
  const socket = connect(port, "127.0.0.1");
  let received = "";
  socket.setEncoding("latin1");
  socket.on("data", (chunk: string) => {
    received += chunk;
  });
  socket.on("error", () => {}); // a reset after the answer, or the test's own
  await new Promise((resolve) => socket.once("connect", resolve));
  return { socket, received: () => received };
}
