import type { IncomingMessage } from "node:http";

/** A failure of a connection's request, as Node's `clientError` event gives it (node:http). */
export interface ParseFailure extends Error {
  code?: string;
  /** The packet being parsed when the parser failed: a Buffer (Fastify's type says otherwise). */
  rawPacket?: unknown;
  /** How many of its bytes were parsed before the failure. */
  bytesParsed?: number;
}

/**
 * What can be read of a request the gateway could not parse: its method, target and the header
 * fields received whole before the failure, by lower-case name, repeated ones joined with `, ` as
 * Node joins them (Origin, Accept-Language).
 */
export interface UnparsedRequest {
  method: string;
  target: string;
  headers: Record<string, string | undefined>;
}

/** A request line (RFC 9112 3): a method (a token), the target, the version. */
const REQUEST_LINE = /^([-!#$%&'*+.^_`|~0-9A-Za-z]+) ([^ \r\n]+) HTTP\/\d\.\d\r?\n/;
/** A field line (RFC 9112 5): a name (a token), a colon, the value between optional whitespace. */
const FIELD_LINE = /^([-!#$%&'*+.^_`|~0-9A-Za-z]+):[ \t]*(.*?)[ \t]*$/;

/**
 * What can be read of the request `error` befell: one whose head was read and whose body was not
 * (`reading`: a body that stopped arriving, a malformed chunk) is a request the router has, with
 * its target and headers; otherwise the packet Node was parsing holds the request line when it
 * begins with one and no head ended in it before the failure, and the field lines that ended
 * before the failure point (Node parsed those; what follows it is not read: its framing is what
 * failed). Undefined when the request line came in an earlier packet (a head over 16 KB sent in
 * parts), a request came before it in the packet (pipelined), or it is not a request line at all:
 * Node's parser keeps what it read of those, and nothing reads that state from outside it.
 */
export function unparsedRequest(
  error: ParseFailure,
  reading: IncomingMessage | undefined,
): UnparsedRequest | undefined {
  if (reading) {
    const headers = reading.headers as Record<string, string | undefined>;
    return { method: reading.method ?? "", target: reading.url ?? "", headers };
  }
  const { rawPacket, bytesParsed } = error;
  if (!Buffer.isBuffer(rawPacket) || bytesParsed === undefined) return undefined;
  const parsed = rawPacket.toString("latin1", 0, bytesParsed);
  const headEnd = parsed.indexOf("\r\n\r\n");
  if (headEnd !== -1 && headEnd + 4 < bytesParsed) return undefined;
  const requestLine = REQUEST_LINE.exec(parsed);
  if (!requestLine) return undefined;
  const [line, method = "", target = ""] = requestLine;
  // Up to the end of the last line that ended before the failure (or of the last field line).
  const fieldsEnd = headEnd === -1 ? parsed.lastIndexOf("\n") + 1 : headEnd + 2;
  const fieldLines = parsed.slice(line.length, Math.max(line.length, fieldsEnd)).split(/\r?\n/);
  return { method, target, headers: fieldsOf(fieldLines) };
}

/**
 * The header fields of whole field lines. A field continued on the next line (obs-fold, RFC 9112
 * 5.2) is left unread, as is any line that is no field line: the value Node would give them is
 * not certain.
 */
function fieldsOf(lines: string[]): Record<string, string | undefined> {
  const fields = new Map<string, string[]>();
  const unread = new Set<string>();
  let last: string | undefined;
  for (const line of lines) {
    if (line === "") continue;
    if (line.startsWith(" ") || line.startsWith("\t")) {
      if (last !== undefined) unread.add(last);
      continue;
    }
    const field = FIELD_LINE.exec(line);
    last = field?.[1]?.toLowerCase();
    if (!field || last === undefined) continue;
    fields.set(last, [...(fields.get(last) ?? []), field[2] ?? ""]);
  }
  // Own properties whatever their names (`__proto__` included).
  return Object.fromEntries(
    [...fields]
      .filter(([name]) => !unread.has(name))
      .map(([name, values]) => [name, values.join(", ")]),
  );
}
