import { connect } from "node:net";

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

/** What came back on a raw connection before the server closed it. */
export async function rawExchange(port: number, send: (write: (text: string) => void) => void) {
  const { socket, received } = await rawConnection(port);
  const closed = new Promise((resolve) => socket.once("close", resolve));
  send((text) => socket.write(text));
  await closed;
  const [head = "", body = ""] = received().split("\r\n\r\n");
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  if (!status) throw new Error(`no answer: ${JSON.stringify(received())}`);
  return { status, headers: head.toLowerCase(), body };
}
