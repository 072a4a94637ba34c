import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { describeProblem, UserError } from "#cli/problems.js";
import { ConfigError } from "#daemon/config.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";

const context = { daemonUrl: "http://127.0.0.1:50051", tokenSource: "--token" };

function daemonError(
  message: string,
  code: Code,
  info: Parameters<typeof create<typeof ErrorInfoSchema>>[1],
) {
  return new ConnectError(message, code, undefined, [
    { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, info) },
  ]);
}

describe("describeProblem", () => {
  it("uses the daemon's raw message and ErrorInfo code, listing validation details", () => {
    const error = daemonError(
      "Validation failed: configuration.layout must be one of",
      Code.InvalidArgument,
      {
        details: [
          { field: "configuration.layout", message: "configuration.layout must be one of" },
          { field: "name", message: "name is required" },
        ],
      },
    );
    expect(describeProblem(error, context)).toMatchObject({
      message: "Validation failed.",
      code: "invalid_argument",
      details: [
        { field: "configuration.layout", message: "configuration.layout must be one of" },
        { field: "name", message: "name is required" },
      ],
      bug: false,
    });
  });

  it("words UNAUTHENTICATED for the operator token only, code unauthorized, with a token hint", () => {
    // The daemon words a team-scoped refusal for an API key; the CLI sent the operator token.
    const problem = describeProblem(
      daemonError("The API key is malformed or unknown", Code.Unauthenticated, {
        code: "invalid_key",
      }),
      context,
    );
    expect(problem).toMatchObject({
      message: "The daemon did not accept the operator token.",
      code: "unauthorized",
    });
    expect(problem.hint).toContain("CONSENT_ADMIN_TOKEN");
    expect(problem.hint).toContain("came from --token");
    const none = describeProblem(
      daemonError("This call needs the operator token", Code.Unauthenticated, {
        code: "unauthorized",
      }),
      { daemonUrl: context.daemonUrl },
    );
    expect(none).toMatchObject({
      message: "This call needs the daemon's operator token.",
      code: "unauthorized",
    });
  });

  it("names the daemon URL when nothing answers there", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:50051"), {
      code: "ECONNREFUSED",
    });
    const error = new ConnectError(
      "connect ECONNREFUSED",
      Code.Unavailable,
      undefined,
      undefined,
      refused,
    );
    expect(describeProblem(error, context)).toMatchObject({
      message: "Cannot reach the daemon at http://127.0.0.1:50051.",
      code: "daemon_unreachable",
      hint: expect.stringContaining("npm start"),
    });
  });

  it("says a daemon that stopped answering a stream did not answer in time, as for a call", () => {
    const silent = new ConnectError("PING timed out", Code.Unavailable);
    expect(describeProblem(silent, context)).toMatchObject({
      message: "The daemon at http://127.0.0.1:50051 did not answer in time.",
      code: "deadline_exceeded",
    });
  });

  it("keeps a daemon UNAVAILABLE with ErrorInfo (identity_unavailable) as the daemon's own failure", () => {
    const error = daemonError("Subject hashing is unavailable", Code.Unavailable, {
      code: "identity_unavailable",
    });
    expect(describeProblem(error, context)).toMatchObject({
      code: "identity_unavailable",
      bug: false,
    });
  });

  it("separates user errors, configuration errors and bugs", () => {
    expect(
      describeProblem(new UserError("No token.", "pass --token", "no_token"), context),
    ).toEqual(
      expect.objectContaining({
        message: "No token.",
        hint: "pass --token",
        code: "no_token",
        bug: false,
      }),
    );
    expect(
      describeProblem(new ConfigError("CONSENT_BASE_URL must be an absolute URL"), context),
    ).toMatchObject({
      code: "invalid_config",
      bug: false,
    });
    expect(describeProblem(new TypeError("x is undefined"), context)).toMatchObject({
      code: "internal",
      bug: true,
      hint: expect.stringContaining("--debug"),
    });
    expect(
      describeProblem(new ConnectError("internal error", Code.Internal), context),
    ).toMatchObject({
      bug: true,
      message: "The daemon failed: internal error.",
    });
  });
});
