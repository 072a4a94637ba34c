import { createServer, type Server, type Socket } from "node:net";
import { BSON, type Document, Long, ObjectId } from "mongodb";
import { openMongoStore } from "#daemon/store/mongo-store.js";
import type { Store } from "#daemon/store/store.js";

/**
 * How the stand-in answers a command: a reply document (or a promise of one, to answer later),
 * or undefined to never answer it.
 */
export type WireAnswer = (
  command: Document,
  name: string,
) => Document | Promise<Document> | undefined;

export interface WireStandIn {
  /** mongodb://127.0.0.1:<port>/<dbName>, connecting to this server alone. */
  uri(dbName: string): string;
  /** Every command received but the handshakes and heartbeats, in order. */
  readonly commands: Document[];
  /** The connection (numbered from 1, as the handshake's connectionId) a command came on. */
  connectionOf(command: Document): number | undefined;
  /**
   * The connections the client has closed: a server kills the commands still running on one
   * (MongoDB stops a find, an aggregate or a getMore whose client has disconnected).
   */
  readonly closedConnections: ReadonlySet<number>;
  close(): Promise<void>;
}

const OP_REPLY = 1;
const OP_QUERY = 2004;
const OP_MSG = 2013;
/** OP_MSG's moreToCome flag: the sender expects no reply. */
const MORE_TO_COME = 1 << 1;

/** What the stand-in's handshake says it is (helloReply). */
export interface StandInKind {
  /** A server outside any replica set. */
  standalone?: boolean;
  /** A server started with --replSet whose set was never initiated (rs.initiate()). */
  uninitiated?: boolean;
  /** A secondary of its replica set, which has no primary for now unless `primary` names one. */
  secondary?: boolean;
  /** With `secondary`: the address it names as its set's primary, a server the stand-in is not. */
  primary?: string;
  /** The replica set it is the primary (or a secondary) of: rs0 unless said. */
  setName?: string;
}

/**
 * A TCP server that speaks enough of MongoDB's wire protocol for the driver to take it for the
 * primary of a one-member replica set of MongoDB 7.0 (sessions, retryable reads and writes), or
 * what `options` says it is instead (StandInKind), and answers every other command through
 * `answer`. It stands in for what a test cannot ask of a real server: a primary that stops
 * answering, an index left under a name by another version. Listens on a free port of 127.0.0.1.
 */
export async function startWireStandIn(
  answer: WireAnswer,
  options: StandInKind = {},
): Promise<WireStandIn> {
  const commands: Document[] = [];
  const connections = new WeakMap<Document, number>();
  const closedConnections = new Set<number>();
  const sockets = new Set<Socket>();
  let closing = false;
  let connectionId = 0;
  let host = "";
  const server: Server = createServer((socket) => {
    const id = ++connectionId;
    sockets.add(socket);
    socket.on("close", () => {
      sockets.delete(socket);
      if (!closing) closedConnections.add(id);
    });
    socket.on("error", () => socket.destroy());
    let pending = Buffer.alloc(0);
    socket.on("data", (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= pending.readInt32LE(0)) {
        const length = pending.readInt32LE(0);
        const message = pending.subarray(0, length);
        pending = pending.subarray(length);
        const request = parseRequest(message);
        const name = Object.keys(request.command)[0] ?? "";
        const isHello = ["hello", "ismaster"].includes(name.toLowerCase());
        if (!isHello) {
          commands.push(request.command);
          connections.set(request.command, id);
        }
        const reply = isHello ? helloReply(host, id, options) : answer(request.command, name);
        if (reply === undefined || request.moreToCome) continue;
        if (reply instanceof Promise) {
          void reply.then((later) => socket.write(encodeReply(request, later)));
        } else socket.write(encodeReply(request, reply));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  host = `127.0.0.1:${port}`;
  return {
    uri: (dbName) => `mongodb://${host}/${dbName}?directConnection=true`,
    commands,
    connectionOf: (command) => connections.get(command),
    closedConnections,
    async close() {
      closing = true;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A cursor's first batch, as find, aggregate and listIndexes answer: its only one, or with a
 * cursor `id` other than 0, one the driver asks the rest of with getMore.
 */
export function cursorReply(ns: string, documents: Document[], id = 0): Document {
  return { cursor: { id: Long.fromNumber(id), ns, firstBatch: documents }, ok: 1 };
}

/**
 * A database for the stand-in: empty but for the documents a test puts in `documents`, which a
 * find or an aggregate of their collection answers whatever its filter. It keeps the indexes it
 * is asked to create, and lists them back; a collection with none created answers listIndexes as
 * a server does one that does not exist; one listed as `{ spec, buildUUID }` is being built, which
 * only a listing with includeBuildUUIDs tells. Its buildInfo names MongoDB 7.0, as its handshake
 * does.
 * `answers` replaces its answer to a command by name.
 */
export function emptyDatabase(
  indexes = new Map<string, Document[]>(),
  answers: Record<string, (command: Document) => Document | Promise<Document>> = {},
) {
  const documents = new Map<string, Document[]>();
  /** Collections created beforehand, with their options, which listCollections lists. */
  const collections = new Map<string, Document>();
  let silent = false;
  return {
    indexes,
    documents,
    collections,
    /** From now on, finds and inserts are never answered: a primary that stopped answering. */
    stopAnswering() {
      silent = true;
    },
    answer(command: Document, name: string): Document | Promise<Document> | undefined {
      const ns = `${command.$db}.${command[name]}`;
      const stored = indexes.get(command[name]) ?? [];
      const answer = answers[name];
      if (answer) return answer(command);
      switch (name) {
        case "find":
        case "aggregate":
          return silent ? undefined : cursorReply(ns, documents.get(command[name]) ?? []);
        case "insert":
          return silent ? undefined : { n: command.documents.length, ok: 1 };
        case "listIndexes":
          if (!indexes.has(command[name])) {
            return {
              ok: 0,
              code: 26,
              codeName: "NamespaceNotFound",
              errmsg: `ns does not exist: ${ns}`,
            };
          }
          return cursorReply(ns, [
            { v: 2, key: { _id: 1 }, name: "_id_" },
            // An index being built is listed as built, but to includeBuildUUIDs.
            ...stored.map((index) => (command.includeBuildUUIDs ? index : (index.spec ?? index))),
          ]);
        case "listCollections":
          // Those listed in `collections` (the name filter's `$in`), with their options.
          return cursorReply(
            `${command.$db}.$cmd.listCollections`,
            [...collections]
              .filter(([collection]) => command.filter?.name?.$in?.includes(collection) ?? true)
              .map(([collection, options]) => ({ name: collection, type: "collection", options })),
          );
        case "createIndexes": {
          // As the server lists them: each with its index version. One asked for while it is
          // being built is listed as built once that build, which the call waited for, ends.
          const asked = command.indexes.map((index: Document) => ({ v: 2, ...index }));
          const names = new Set(asked.map((index: Document) => index.name));
          indexes.set(command[name], [
            ...stored.filter((index) => !names.has((index.spec ?? index).name)),
            ...asked,
          ]);
          return { numIndexesBefore: 1, numIndexesAfter: 1 + command.indexes.length, ok: 1 };
        }
        case "buildInfo":
          return { version: "7.0.14", versionArray: [7, 0, 14, 0], ok: 1 };
        default:
          return { ok: 1 };
      }
    },
  };
}

function helloReply(host: string, connectionId: number, kind: StandInKind): Document {
  const primary = !kind.uninitiated && !kind.secondary;
  return {
    ismaster: primary,
    isWritablePrimary: primary,
    helloOk: true,
    ...memberFields(host, kind),
    maxBsonObjectSize: 16 * 1024 * 1024,
    maxMessageSizeBytes: 48_000_000,
    maxWriteBatchSize: 100_000,
    localTime: new Date(),
    logicalSessionTimeoutMinutes: 30,
    connectionId,
    minWireVersion: 0,
    maxWireVersion: 21,
    readOnly: false,
    ok: 1,
  };
}

/** What a hello says of the server's replica set: nothing for a standalone server. */
function memberFields(host: string, kind: StandInKind): Document {
  if (kind.standalone) return {};
  if (kind.uninitiated) {
    return {
      isreplicaset: true,
      secondary: false,
      info: "Does not have a valid replica set config",
    };
  }
  const set = { setName: kind.setName ?? "rs0", setVersion: 1, hosts: [host], me: host };
  if (kind.secondary && kind.primary) {
    return { ...set, hosts: [host, kind.primary], secondary: true, primary: kind.primary };
  }
  if (kind.secondary) return { ...set, secondary: true };
  return { ...set, electionId: new ObjectId("7fffffff0000000000000001"), primary: host };
}

interface WireRequest {
  requestId: number;
  opCode: number;
  moreToCome: boolean;
  command: Document;
}

/** The command of an OP_QUERY (the driver's first handshake) or an OP_MSG (everything after). */
function parseRequest(message: Buffer): WireRequest {
  const requestId = message.readInt32LE(4);
  const opCode = message.readInt32LE(12);
  if (opCode === OP_QUERY) {
    const nameEnd = message.indexOf(0, 20);
    const queryAt = nameEnd + 1 + 8;
    return { requestId, opCode, moreToCome: false, command: readDocument(message, queryAt) };
  }
  if (opCode !== OP_MSG) throw new Error(`the stand-in does not read opCode ${opCode}`);
  const flags = message.readUInt32LE(16);
  let command: Document = {};
  const sequences: [string, Document[]][] = [];
  for (let at = 20; at < message.length; ) {
    const kind = message.readUInt8(at);
    at += 1;
    if (kind === 0) {
      command = readDocument(message, at);
      at += message.readInt32LE(at);
      continue;
    }
    // A document sequence: its size, its field name, then documents up to its end.
    const end = at + message.readInt32LE(at);
    const nameEnd = message.indexOf(0, at + 4);
    const documents: Document[] = [];
    for (let doc = nameEnd + 1; doc < end; doc += message.readInt32LE(doc)) {
      documents.push(readDocument(message, doc));
    }
    sequences.push([message.toString("utf8", at + 4, nameEnd), documents]);
    at = end;
  }
  for (const [field, documents] of sequences) command[field] = documents;
  return { requestId, opCode, moreToCome: (flags & MORE_TO_COME) !== 0, command };
}

function readDocument(message: Buffer, at: number): Document {
  return BSON.deserialize(message.subarray(at, at + message.readInt32LE(at)));
}

/** The reply in the request's own protocol: OP_REPLY to an OP_QUERY, OP_MSG to an OP_MSG. */
function encodeReply(request: WireRequest, reply: Document): Buffer {
  const document = Buffer.from(BSON.serialize(reply));
  const body =
    request.opCode === OP_QUERY
      ? Buffer.concat([replyFields(), document])
      : Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), document]);
  const header = Buffer.alloc(16);
  header.writeInt32LE(16 + body.length, 0);
  header.writeInt32LE(0, 4);
  header.writeInt32LE(request.requestId, 8);
  header.writeInt32LE(request.opCode === OP_QUERY ? OP_REPLY : OP_MSG, 12);
  return Buffer.concat([header, body]);
}

/** OP_REPLY's fields before its one document: no flags, no cursor, from 0, one document. */
function replyFields(): Buffer {
  const fields = Buffer.alloc(20);
  fields.writeInt32LE(1, 16);
  return fields;
}

/**
 * The service's MongoDB store over a stand-in that answers as `database` does (emptyDatabase),
 * each command bounded by `timeoutMs`. `close` closes the store, then the stand-in.
 */
export async function storeOnStandIn(
  database: { answer: WireAnswer },
  timeoutMs = 1_000,
): Promise<{ store: Store; server: WireStandIn; close(): Promise<void> }> {
  const server = await startWireStandIn((command, name) => database.answer(command, name));
  try {
    const store = await openMongoStore({ uri: server.uri("shop"), timeoutMs });
    return {
      store,
      server,
      async close() {
        await store.close();
        await server.close();
      },
    };
  } catch (error) {
    await server.close();
    throw error;
  }
}

/** A stored record as MongoDB holds it, for a stand-in's collection: its id as `_id`. */
export function documentOf<T extends { id: string }>({ id, ...fields }: T): Document {
  return { _id: id, ...fields };
}

/**
 * A write's reply whose majority did not answer within its wtimeout (code 64): what `reply` says
 * (how many documents it wrote, or its `writeErrors`) happened on the primary alone.
 */
export function writeConcernTimedOut(reply: Document = { n: 0 }): Document {
  return {
    ok: 1,
    ...reply,
    writeConcernError: {
      code: 64,
      codeName: "WriteConcernTimeout",
      errmsg: "waiting for replication timed out",
    },
  };
}
