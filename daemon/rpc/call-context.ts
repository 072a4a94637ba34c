import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { type ContextValues, createContextValues, type HandlerContext } from "@connectrpc/connect";

/** What a call's context is made of: createHandlerContext's init, without deadline or signals. */
export interface CallContextInit {
  service: DescService;
  method: DescMethod;
  protocolName: string;
  requestMethod: string;
  url: string;
  requestHeader: HeadersInit | undefined;
  contextValues: ContextValues | undefined;
}

/**
 * A header name as the caller's record holds it (keptAsIs): in lower case. The record is read by
 * the name as it is, where Headers would find any case, so a name in capitals would read an
 * absent header without a word; the type checker refuses one instead, at no cost to a call.
 */
export type HeaderName = Lowercase<string>;

/** A HandlerContext that the one serving the call ends when the call is over. */
export type CallContext = HandlerContext & { abort(reason?: unknown): void };

/** An HTTP token in lower case: a header name as Headers keeps it. */
const LOWER_CASE_NAME = /^[-!#$%&'*+.^_`|~0-9a-z]+$/;
/**
 * A header value as Headers keeps it: Latin-1 without NUL, CR or LF, no space or tab around it
 * (Headers strips those, and refuses the rest).
 */
const KEPT_VALUE =
  /^(?:[^\0\r\n\t \u0100-\uffff](?:[^\0\r\n\u0100-\uffff]*[^\0\r\n\t \u0100-\uffff])?)?$/;

/**
 * A copy of a plain header record whose every name and value Headers would keep as they are;
 * undefined for anything else (an array of pairs, a Headers, a name in capitals, a value Headers
 * would trim or refuse), which only a Headers reads as Headers does. Such a record can stand in
 * for the Headers made of it: the daemon's contexts read it (PlainCallContext), and the gateway's
 * client writes it on the wire as it is (gateway/daemon-transport.ts).
 */
export function keptAsIs(init: HeadersInit | undefined): Record<string, string> | undefined {
  // Without a prototype: a name it has (constructor) is no header the caller sent.
  const record: Record<string, string> = Object.create(null);
  if (init === undefined) return record;
  if (typeof init !== "object" || init === null) return undefined;
  // Headers reads an object with an iterator as pairs, and refuses a name that is a symbol.
  if (Symbol.iterator in init || Object.getOwnPropertySymbols(init).length > 0) return undefined;
  for (const name of Object.keys(init)) {
    const value = (init as Record<string, unknown>)[name];
    // A name __proto__ Headers loses (it copies the record into a plain object first).
    if (
      typeof value !== "string" ||
      !LOWER_CASE_NAME.test(name) ||
      !KEPT_VALUE.test(value) ||
      name === "__proto__"
    ) {
      return undefined;
    }
    record[name] = value;
  }
  return record;
}

/**
 * The context of a call with neither deadline nor caller signal, which the one serving the call
 * ends (abort) once the call is over: the in-process transport, the daemon port's short way for
 * Connect unary calls. Most handlers never read the signal or the trailers, so both are made on
 * first use; abort() reaches the signal only if one was made, and it is then aborted exactly as
 * createHandlerContext's would be.
 *
 * The request's Headers is made on first use too: the daemon's own first read of a call
 * (daemon/auth/caller.ts) takes its few values from the caller's record through
 * requestHeaderValue, where the record holds them as Headers would. A record Headers would
 * refuse is refused at once, as createHandlerContext refuses it.
 *
 * A class, where an object literal with accessors would do: V8 defines a literal's accessors as
 * it makes the object, a closure each, and that cost a call as much as the rest of the hop. Its
 * accessors and methods are the prototype's, so a spread copy (`{ ...ctx }`) has no
 * requestHeader, signal, abort or timeoutMs: pass the context itself on (no code copies one).
 */
export class PlainCallContext implements CallContext {
  readonly service: DescService;
  readonly method: DescMethod;
  readonly protocolName: string;
  readonly requestMethod: string;
  readonly url: string;
  readonly responseHeader = new Headers();
  readonly values: ContextValues;
  /** The caller's header record while no Headers is made of it. */
  private headerRecord: Record<string, string> | undefined;
  private header: Headers | undefined;
  private controller: AbortController | undefined = undefined;
  private trailer: Headers | undefined = undefined;
  private finished: { reason: unknown } | undefined = undefined;

  constructor(init: CallContextInit) {
    this.service = init.service;
    this.method = init.method;
    this.protocolName = init.protocolName;
    this.requestMethod = init.requestMethod;
    this.url = init.url;
    this.headerRecord = keptAsIs(init.requestHeader);
    this.header = this.headerRecord ? undefined : new Headers(init.requestHeader);
    this.values = init.contextValues ?? createContextValues();
  }

  get requestHeader(): Headers {
    if (!this.header) {
      this.header = new Headers(this.headerRecord);
      this.headerRecord = undefined;
    }
    return this.header;
  }

  /** A request header's value, by its name in lower case, as `requestHeader.get(name)` reads it. */
  requestHeaderValue(name: HeaderName): string | null {
    return this.header ? this.header.get(name) : (this.headerRecord?.[name] ?? null);
  }

  get responseTrailer(): Headers {
    this.trailer ??= new Headers();
    return this.trailer;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.finished) this.controller.abort(this.finished.reason);
    }
    return this.controller.signal;
  }

  timeoutMs(): number | undefined {
    return undefined;
  }

  /** Ends the call: its signal, made now or later, is aborted with `reason` (the first given). */
  abort(reason?: unknown): void {
    this.finished ??= { reason };
    this.controller?.abort(reason);
  }
}

/**
 * A request header's value, by its name in lower case: from the caller's record where the context
 * still holds one, without making its Headers; else as `ctx.requestHeader.get(name)`.
 */
export function requestHeaderValue(ctx: HandlerContext, name: HeaderName): string | null {
  return ctx instanceof PlainCallContext
    ? ctx.requestHeaderValue(name)
    : ctx.requestHeader.get(name);
}
