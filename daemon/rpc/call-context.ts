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

/** A HandlerContext that the one serving the call ends when the call is over. */
export type CallContext = HandlerContext & { abort(reason?: unknown): void };

/**
 * The context of a call with neither deadline nor caller signal, which the one serving the call
 * ends (abort) once the call is over: the in-process transport, the daemon port's short way for
 * Connect unary calls. Most handlers never read the signal or the trailers, so both are made on
 * first use; abort() reaches the signal only if one was made, and it is then aborted exactly as
 * createHandlerContext's would be.
 *
 * A class, where an object literal with accessors would do: V8 defines a literal's accessors as
 * it makes the object, a closure each, and that cost a call as much as the rest of the hop.
 */
export class PlainCallContext implements CallContext {
  readonly service: DescService;
  readonly method: DescMethod;
  readonly protocolName: string;
  readonly requestMethod: string;
  readonly url: string;
  readonly requestHeader: Headers;
  readonly responseHeader = new Headers();
  readonly values: ContextValues;
  private controller: AbortController | undefined = undefined;
  private trailer: Headers | undefined = undefined;
  private finished: { reason: unknown } | undefined = undefined;

  constructor(init: CallContextInit) {
    this.service = init.service;
    this.method = init.method;
    this.protocolName = init.protocolName;
    this.requestMethod = init.requestMethod;
    this.url = init.url;
    this.requestHeader = new Headers(init.requestHeader);
    this.values = init.contextValues ?? createContextValues();
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
