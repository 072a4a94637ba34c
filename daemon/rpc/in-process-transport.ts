import {
  create,
  type DescMessage,
  type DescMethod,
  type DescMethodStreaming,
  type DescMethodUnary,
  type DescService,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ContextValues,
  createHandlerContext,
  createServiceImplSpec,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type ServiceImpl,
  type StreamRequest,
  type StreamResponse,
  type Transport,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { type CallContext, PlainCallContext } from "#daemon/rpc/call-context.js";
import { kCallerPresence } from "#daemon/rpc/caller-presence.js";

export interface InProcessTransportOptions {
  /** The services, registered as for a server (Daemon.routes). */
  routes: (router: ConnectRouter) => void;
  /** Server interceptors, run around every call as a server runs them (Daemon.interceptors). */
  interceptors?: Interceptor[];
}

/** The reason a finished call's context signal is aborted with: a value, so no DOMException is built. */
export const CALL_FINISHED = new ConnectError("the call has finished", Code.Canceled);

/** The URL a call reports to the daemon's handlers: no network is involved. */
const URL_BASE = "in-process://consentd";

/** The registration side of a ConnectRouter, collecting each method's implementation. */
function collectMethods(routes: (router: ConnectRouter) => void): Map<DescMethod, MethodImplSpec> {
  const methods = new Map<DescMethod, MethodImplSpec>();
  const router = {
    handlers: [],
    service(service: DescService, implementation: Partial<ServiceImpl<DescService>>) {
      const spec = createServiceImplSpec(service, implementation);
      for (const method of service.methods) {
        const impl = spec.methods[method.localName];
        if (impl) methods.set(method, impl);
      }
      return router;
    },
    rpc(method: DescMethod, impl: unknown) {
      methods.set(method, { kind: method.methodKind, method, impl } as MethodImplSpec);
      return router;
    },
  };
  routes(router as unknown as ConnectRouter);
  return methods;
}

/** Server-side failures as a client sees them: always a ConnectError (connect-es does the same). */
function asConnectError(error: unknown): ConnectError {
  return ConnectError.from(error, Code.Internal);
}

/**
 * The daemon's services as a table of implementations: each method's implementation run behind
 * the server interceptors, as a server runs it. The in-process transport calls through it, and so
 * does the daemon's port for Connect unary calls (connect-unary-route.ts).
 */
export interface ServiceTable {
  /** The unary method served at `/package.Service/Method`, if any. */
  unaryAt(path: string): DescMethodUnary | undefined;
  /** Whether the daemon serves the service of this full name (`package.Service`). */
  serves(service: string): boolean;
  /**
   * Runs a unary method's implementation for a request message, behind the interceptors. Throws
   * what the implementation or an interceptor threw.
   */
  invokeUnary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    ctx: HandlerContext,
    message: MessageShape<I>,
  ): Promise<UnaryResponse<I, O>>;
  /** The implementation of a method; UNIMPLEMENTED when the daemon does not serve it. */
  implOf(method: DescMethod): MethodImplSpec;
  /** Wraps a call in the interceptors, the first one outermost. */
  intercepted<T>(next: T): T;
}

export function createServiceTable(options: InProcessTransportOptions): ServiceTable {
  const methods = collectMethods(options.routes);
  const interceptors = (options.interceptors ?? []).concat().reverse();
  const unaryByPath = new Map<string, DescMethodUnary>();
  const services = new Set<string>();
  for (const method of methods.keys()) {
    services.add(method.parent.typeName);
    if (method.methodKind === "unary") {
      unaryByPath.set(`/${method.parent.typeName}/${method.name}`, method as DescMethodUnary);
    }
  }

  function implOf(method: DescMethod): MethodImplSpec {
    const spec = methods.get(method);
    if (spec) return spec;
    // The same answer a server gives for a procedure it does not serve.
    throw new ConnectError(
      `${method.parent.typeName}/${method.name} is not implemented`,
      Code.Unimplemented,
    );
  }

  function intercepted<T>(next: T): T {
    let wrapped = next;
    for (const interceptor of interceptors) wrapped = interceptor(wrapped as never) as unknown as T;
    return wrapped;
  }

  return {
    unaryAt: (path) => unaryByPath.get(path),
    serves: (service) => services.has(service),
    implOf,
    intercepted,
    async invokeUnary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      ctx: HandlerContext,
      message: MessageShape<I>,
    ): Promise<UnaryResponse<I, O>> {
      const spec = implOf(method);
      if (spec.kind !== "unary") throw new ConnectError("not a unary method", Code.Internal);
      const call = intercepted(async (request: UnaryRequest<I, O>) => {
        const output = await spec.impl(request.message as never, ctx);
        return unaryResponse(method, ctx, create(method.output, output as never));
      });
      return (await call(unaryRequest(method, ctx, message))) as UnaryResponse<I, O>;
    },
  };
}

/**
 * A Transport that calls the daemon's service implementations in the same process: the gateway's
 * clients work unchanged, but no message is serialised, no HTTP request is simulated, and a call
 * costs one HandlerContext and the interceptor chain (what `npm start` uses instead of
 * createRouterTransport). What a handler sees is what it sees behind a server: the caller's
 * headers, the context values the caller passes (the peer address, daemon/auth/caller.ts), a
 * signal aborted when the call ends or its REST client leaves (caller-presence.ts); errors leave
 * as ConnectErrors with their details (ErrorInfo, decisions §7) and the gateway translates them as
 * it does errors from the network.
 * Messages are handed over as objects: neither side keeps or changes them after the call.
 */
export function createInProcessTransport(options: InProcessTransportOptions): Transport {
  const table = createServiceTable(options);
  const { implOf, intercepted } = table;

  function contextOf(
    method: DescMethod,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: HeadersInit | undefined,
    contextValues: ContextValues | undefined,
  ): CallContext {
    const init = {
      service: method.parent,
      method,
      protocolName: "connect",
      requestMethod: "POST",
      url: `${URL_BASE}/${method.parent.typeName}/${method.name}`,
      requestHeader: header,
      contextValues,
    };
    // A deadline or a caller's signal needs connect-es' linked signals; a plain call does not.
    if (signal !== undefined || (timeoutMs !== undefined && timeoutMs > 0)) {
      return createHandlerContext({ ...init, timeoutMs, requestSignal: signal });
    }
    return new PlainCallContext(init);
  }

  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: MessageInitShape<I>,
      contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      const ctx = contextOf(method, signal, timeoutMs, header, contextValues);
      // A REST client that leaves aborts the call's context (its signal), as a reset stream does
      // behind the daemon's port.
      const presence = contextValues?.get(kCallerPresence);
      try {
        presence?.watch(ctx);
        const answer = table.invokeUnary(method, ctx, create(method.input, input));
        return await (timeoutMs !== undefined && timeoutMs > 0 ? byDeadline(answer, ctx) : answer);
      } catch (error) {
        throw asConnectError(error);
      } finally {
        presence?.unwatch(ctx);
        ctx.abort(CALL_FINISHED);
      }
    },

    async stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: AsyncIterable<MessageInitShape<I>>,
      contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      const ctx = contextOf(method, signal, timeoutMs, header, contextValues);
      try {
        const spec = implOf(method);
        if (spec.kind === "unary") throw new ConnectError("not a streaming method", Code.Internal);
        const call = intercepted(async (request: StreamRequest<I, O>) => {
          const output = await outputOf(spec, request.message, ctx);
          return streamResponse(method, ctx, created(method.output, output));
        });
        const response = await call(streamRequest(method, ctx, created(method.input, input)));
        return {
          ...response,
          // Named, as a response's trailer may be a getter, which a spread leaves out.
          trailer: response.trailer,
          message: finishing(response.message as AsyncIterable<MessageShape<O>>, ctx),
        };
      } catch (error) {
        ctx.abort(CALL_FINISHED);
        throw asConnectError(error);
      }
    },
  } as Transport;
}

/**
 * A unary call's answer, or its deadline passing first (DEADLINE_EXCEEDED), as a client over the
 * network is failed at its deadline whatever the daemon does: a handler that does not watch its
 * signal (a health check waiting on a stalled store) would otherwise hold its caller until the
 * store answers. The handler goes on; what it answers later is dropped.
 */
function byDeadline<T>(answer: Promise<T>, ctx: HandlerContext): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const passed = () => {
      const reason: unknown = ctx.signal.reason;
      // Only the deadline: a caller that leaves is answered as the handler ends the call.
      if (reason instanceof ConnectError && reason.code === Code.DeadlineExceeded) reject(reason);
    };
    ctx.signal.addEventListener("abort", passed, { once: true });
    const settled = () => ctx.signal.removeEventListener("abort", passed);
    answer.then(
      (value) => {
        settled();
        resolve(value);
      },
      (error: unknown) => {
        settled();
        reject(error);
      },
    );
  });
}

/** What a call's request and response share: its method, a message, the context they read. */
abstract class CallPart {
  readonly service: DescService;
  constructor(
    readonly stream: boolean,
    readonly method: DescMethod,
    readonly message: unknown,
    protected readonly ctx: HandlerContext,
  ) {
    this.service = method.parent;
  }
}

/**
 * A call's request as the interceptors see it. Its signal and header are the context's, read when
 * asked for (a context makes each on first use); a class rather than a literal with getters, which
 * V8 makes at the cost of a closure and an accessor defined at run time on every call. Getters of
 * a class are not the request's own properties: an interceptor that passes on a copy of the
 * request names them (`{ ...request, signal: request.signal, header: request.header }`).
 */
class CallRequest extends CallPart {
  readonly requestMethod: string;
  readonly url: string;
  readonly contextValues: ContextValues;
  constructor(stream: boolean, method: DescMethod, message: unknown, ctx: HandlerContext) {
    super(stream, method, message, ctx);
    this.requestMethod = ctx.requestMethod;
    this.url = ctx.url;
    this.contextValues = ctx.values;
  }
  get signal(): AbortSignal {
    return this.ctx.signal;
  }
  get header(): Headers {
    return this.ctx.requestHeader;
  }
}

/** A call's response as the interceptors see it: the context's headers, its trailers when asked for. */
class CallResponse extends CallPart {
  readonly header: Headers;
  constructor(stream: boolean, method: DescMethod, message: unknown, ctx: HandlerContext) {
    super(stream, method, message, ctx);
    this.header = ctx.responseHeader;
  }
  get trailer(): Headers {
    return this.ctx.responseTrailer;
  }
}

function unaryRequest<I extends DescMessage, O extends DescMessage>(
  method: DescMethodUnary<I, O>,
  ctx: HandlerContext,
  message: MessageShape<I>,
): UnaryRequest<I, O> {
  return new CallRequest(false, method, message, ctx) as unknown as UnaryRequest<I, O>;
}

function unaryResponse<I extends DescMessage, O extends DescMessage>(
  method: DescMethodUnary<I, O>,
  ctx: HandlerContext,
  message: MessageShape<O>,
): UnaryResponse<I, O> {
  return new CallResponse(false, method, message, ctx) as unknown as UnaryResponse<I, O>;
}

function streamRequest<I extends DescMessage, O extends DescMessage>(
  method: DescMethodStreaming<I, O>,
  ctx: HandlerContext,
  message: AsyncIterable<MessageShape<I>>,
): StreamRequest<I, O> {
  return new CallRequest(true, method, message, ctx) as unknown as StreamRequest<I, O>;
}

function streamResponse<I extends DescMessage, O extends DescMessage>(
  method: DescMethodStreaming<I, O>,
  ctx: HandlerContext,
  message: AsyncIterable<MessageShape<O>>,
): StreamResponse<I, O> {
  return new CallResponse(true, method, message, ctx) as unknown as StreamResponse<I, O>;
}

/** Calls a streaming implementation; a server-streaming one takes the single request message. */
async function outputOf(
  spec: Exclude<MethodImplSpec, { kind: "unary" }>,
  requests: AsyncIterable<unknown>,
  ctx: HandlerContext,
): Promise<AsyncIterable<unknown>> {
  switch (spec.kind) {
    case "server_streaming": {
      let first: unknown;
      let count = 0;
      for await (const request of requests) {
        if (count++ === 0) first = request;
      }
      if (count !== 1) {
        throw new ConnectError(
          `protocol error: expected one request message, got ${count}`,
          Code.InvalidArgument,
        );
      }
      return spec.impl(first as never, ctx);
    }
    case "client_streaming":
      return (async function* () {
        yield await spec.impl(requests as never, ctx);
      })();
    case "bidi_streaming":
      return spec.impl(requests as never, ctx);
  }
}

/** Each message of a stream as a message of `schema`. */
async function* created<D extends DescMessage>(
  schema: D,
  messages: AsyncIterable<unknown>,
): AsyncIterable<MessageShape<D>> {
  for await (const message of messages) yield create(schema, message as never);
}

/**
 * The response stream as the caller reads it: failures arrive as ConnectErrors, and the context's
 * signal is aborted once the caller stops reading or the stream ends (Health/Watch waits on it).
 */
async function* finishing<T>(messages: AsyncIterable<T>, ctx: CallContext): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (error) {
    throw asConnectError(error);
  } finally {
    ctx.abort(CALL_FINISHED);
  }
}
