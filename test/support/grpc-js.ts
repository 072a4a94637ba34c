import { fileURLToPath } from "node:url";
import { fromBinary } from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { AnySchema, anyUnpack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { type ErrorInfo, ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";

const PROTO_ROOT = fileURLToPath(new URL("../../proto", import.meta.url));

type ClientConstructor = new (
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
) => grpc.Client;

/** The services loadConsentProtos() exposes. */
export interface ConsentProtos {
  consent: {
    v1: {
      BannerService: ClientConstructor;
      SubjectService: ClientConstructor;
      ConsentLogService: ClientConstructor;
    };
  };
  grpc: { health: { v1: { Health: ClientConstructor } } };
}

/** proto-loader's plain objects (longs as strings, enums as names) for what the tests read. */
export interface TimestampObject {
  seconds: string;
  nanos: number;
}
export interface ValueObject {
  kind?: string;
  listValue?: { values?: ValueObject[] };
  structValue?: StructObject;
  [field: string]: unknown;
}
export interface StructObject {
  fields?: Record<string, ValueObject>;
}
export interface SnapshotObject {
  consentState: StructObject;
  protocolVersion: number;
  version: number;
  clientUpdatedAt: string;
  updatedAt: TimestampObject;
  expiresAt: TimestampObject;
}
export interface BannerObject {
  id: string;
  publicId: string;
  name: string;
  domain: string;
  isActive: boolean;
  revision: number;
  configuration: { layout: string };
  compliance: { gdpr: boolean; ccpa: boolean; lgpd: boolean };
  createdAt: TimestampObject;
}

/**
 * The .proto files as a third-party gRPC integrator loads them: @grpc/proto-loader with proto/ as
 * include dir (google/protobuf/* come bundled with proto-loader's protobufjs).
 */
export function loadConsentProtos(): ConsentProtos {
  const definition = loadSync(
    [
      "consent/v1/banner.proto",
      "consent/v1/subject.proto",
      "consent/v1/consent_log.proto",
      "consent/v1/errors.proto",
      "grpc/health/v1/health.proto",
    ],
    { includeDirs: [PROTO_ROOT], longs: String, enums: String, defaults: true, oneofs: true },
  );
  return grpc.loadPackageDefinition(definition) as unknown as ConsentProtos;
}

type UnaryMethod = (
  request: unknown,
  metadata: grpc.Metadata,
  callback: (error: grpc.ServiceError | null, response: unknown) => void,
) => grpc.ClientUnaryCall;

export type Outcome<T> =
  | { ok: true; response: T; metadata: grpc.Metadata }
  | { ok: false; error: grpc.ServiceError };

/** A unary call as a promise that never rejects: the response, or the ServiceError. */
export function unary<T>(
  client: grpc.Client,
  method: string,
  request: unknown,
  metadata = new grpc.Metadata(),
): Promise<Outcome<T>> {
  return new Promise((resolve) => {
    let headers = new grpc.Metadata();
    const call = (client as unknown as Record<string, UnaryMethod>)[method]?.call(
      client,
      request,
      metadata,
      (error, response) =>
        resolve(
          error ? { ok: false, error } : { ok: true, response: response as T, metadata: headers },
        ),
    );
    if (!call) throw new Error(`no method ${method}`);
    call.on("metadata", (received: grpc.Metadata) => {
      headers = received;
    });
  });
}

/**
 * A unary call of `path` whose request message is `message`'s bytes as they are, as grpc-js sends
 * it over its own channel: the call's ServiceError, or null when it succeeded.
 */
export async function unaryBytes(
  url: string,
  path: string,
  message: Buffer,
): Promise<grpc.ServiceError | null> {
  const client = new grpc.Client(addressOf(url), grpc.credentials.createInsecure());
  try {
    return await new Promise((resolve) => {
      client.makeUnaryRequest(
        path,
        (bytes: Buffer) => bytes,
        (bytes: Buffer) => bytes,
        message,
        (failure) => resolve(failure),
      );
    });
  } finally {
    client.close();
  }
}

/** The response of a call that must succeed; a failure fails the test with the gRPC error. */
export function responseOf<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw outcome.error;
  return outcome.response;
}

/** `authorization: Bearer <key>` metadata, as decisions §7 asks of gRPC callers. */
export function bearer(key: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${key}`);
  return metadata;
}

/**
 * Decodes `grpc-status-details-bin` (a google.rpc.Status: code 1, message 2, repeated Any details 3)
 * and unpacks its consent.v1.ErrorInfo detail.
 */
export function errorInfoOf(error: grpc.ServiceError): { typeUrls: string[]; info?: ErrorInfo } {
  const [raw] = error.metadata.get("grpc-status-details-bin");
  if (!(raw instanceof Uint8Array)) return { typeUrls: [] };
  const reader = new BinaryReader(raw);
  const details = [];
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 3) details.push(fromBinary(AnySchema, reader.bytes()));
    else reader.skip(wireType);
  }
  const typeUrls = details.map((detail) => detail.typeUrl);
  const info = details.map((detail) => anyUnpack(detail, ErrorInfoSchema)).find(Boolean);
  return { typeUrls, info };
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A JSON value as proto-loader's google.protobuf.Value object. */
function toValue(value: Json): ValueObject {
  if (value === null) return { nullValue: "NULL_VALUE" };
  if (typeof value === "boolean") return { boolValue: value };
  if (typeof value === "number") return { numberValue: value };
  if (typeof value === "string") return { stringValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  return { structValue: toStruct(value) };
}

export function toStruct(object: Record<string, unknown>): StructObject {
  return {
    fields: Object.fromEntries(
      Object.entries(object).map(([name, value]) => [name, toValue(value as Json)]),
    ),
  };
}

function fromValue(value: ValueObject): Json {
  switch (value.kind) {
    case "nullValue":
      return null;
    case "listValue":
      return (value.listValue?.values ?? []).map(fromValue);
    case "structValue":
      return fromStruct(value.structValue ?? {});
    default:
      return value[value.kind ?? ""] as Json;
  }
}

/** proto-loader's google.protobuf.Struct object back to JSON. */
export function fromStruct(struct: StructObject): Record<string, Json> {
  return Object.fromEntries(
    Object.entries(struct.fields ?? {}).map(([name, value]) => [name, fromValue(value)]),
  );
}

/** A google.protobuf.Timestamp (longs as strings) as the ISO string REST sends. */
export function isoOf(timestamp: TimestampObject): string {
  return new Date(Number(timestamp.seconds) * 1000 + timestamp.nanos / 1e6).toISOString();
}

export function addressOf(url: string): string {
  return new URL(url).host;
}
