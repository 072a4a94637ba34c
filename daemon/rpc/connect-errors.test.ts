import {
  Code,
  ConnectError,
  createClient,
  createRouterTransport,
  type HandlerContext,
} from "@connectrpc/connect";
import { MongoNetworkError } from "mongodb";
import { describe, expect, it } from "vitest";
import { domainErrorInterceptor } from "#daemon/rpc/connect-errors.js";
import { mongoUnavailability } from "#daemon/store/mongo-unavailable.js";
import { httpErrorOf } from "#gateway/errors.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { Health } from "#gen/grpc/health/v1/health_pb.js";

/** A Health service whose checks run `check`, behind the daemon's error interceptor. */
function healthBehindInterceptor(
  check: (ctx: HandlerContext) => Promise<never> | never,
  logger: Parameters<typeof domainErrorInterceptor>[0],
) {
  const transport = createRouterTransport(
    (router) =>
      router.service(Health, {
        check: (_request, ctx) => check(ctx),
        async *watch() {},
      }),
    {
      router: {
        interceptors: [
          domainErrorInterceptor(logger, {
            unavailability: mongoUnavailability,
            isDamage: () => false,
          }),
        ],
      },
    },
  );
  return createClient(Health, transport);
}

/** A Health service whose every check throws `error`, behind the daemon's error interceptor. */
function failingWith(error: () => unknown) {
  const lines: { level: string; details: object; message: string }[] = [];
  const logger = {
    error: (details: object, message: string) => lines.push({ level: "error", details, message }),
    warn: (details: object, message: string) => lines.push({ level: "warn", details, message }),
  };
  const health = healthBehindInterceptor(() => {
    throw error();
  }, logger);
  const failure = () =>
    health.check({ service: "" }).then(
      () => {
        throw new Error("expected the call to fail");
      },
      (reason: unknown) => ConnectError.from(reason),
    );
  return { lines, failure };
}

describe("the RPC edge's answer to a store that cannot be reached", () => {
  it("is unavailable with a Retry-After, which the gateway answers as 503 unavailable", async () => {
    const { failure } = failingWith(() => new MongoNetworkError("connection 4 to 10.0.0.7 closed"));
    const error = await failure();
    expect(error.code).toBe(Code.Unavailable);
    expect(error.findDetails(ErrorInfoSchema)[0]?.code).toBe("unavailable");
    expect(error.metadata.get("retry-after")).toBe("1");
    // Nothing of the driver's text (hosts, connection numbers) reaches the caller.
    expect(error.rawMessage).toBe("The store is temporarily unavailable; retry later");
    expect(httpErrorOf(error)).toMatchObject({
      status: 503,
      code: "unavailable",
      message: "The store is temporarily unavailable; retry later",
      headers: { "Retry-After": "1" },
    });
  });

  it("is logged once while it lasts, not once per failed call", async () => {
    const { lines, failure } = failingWith(() => new MongoNetworkError("connection refused"));
    for (let call = 0; call < 5; call += 1) await failure();
    expect(lines.map((line) => [line.level, line.message])).toEqual([
      ["warn", "the store cannot be reached; calls fail with unavailable until it can"],
    ]);
  });

  it("is a cancellation, unlogged, for a read its call's signal stopped with a DOMException", async () => {
    const lines: string[] = [];
    const logger = { error: () => lines.push("error"), warn: () => lines.push("warn") };
    let stopped: unknown;
    let reading: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      reading = resolve;
    });
    // As the driver fails a read its signal stopped: with the signal's reason.
    const health = healthBehindInterceptor(async (ctx) => {
      const aborted = new Promise((go) => ctx.signal.addEventListener("abort", go));
      reading();
      await aborted;
      stopped = ctx.signal.reason;
      throw ctx.signal.reason;
    }, logger);
    const caller = new AbortController();
    const call = health.check({ service: "" }, { signal: caller.signal });
    await started;
    caller.abort();
    await expect(call).rejects.toMatchObject({ code: Code.Canceled });
    await expect.poll(() => stopped).toBeInstanceOf(DOMException);
    expect(lines).toEqual([]);
  });

  it("leaves any other failure internal, logged with its cause", async () => {
    const { lines, failure } = failingWith(() => new TypeError("x is not a function"));
    const error = await failure();
    expect([error.code, error.rawMessage]).toEqual([Code.Internal, "internal error"]);
    expect(lines.map((line) => line.level)).toEqual(["error"]);
  });
});
