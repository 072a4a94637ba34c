import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { operatorTokenVerdict } from "#gateway/token-watch.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { ErrorInfoSchema, OperatorTokenRefusal } from "#gen/consent/v1/errors_pb.js";

/** The verdict on a token of a daemon stand-in whose GetTeam fails with `answer`. */
function verdictOn(answer: ConnectError) {
  const transport = createRouterTransport((router) =>
    router.service(AdminService, {
      getTeam() {
        throw answer;
      },
    }),
  );
  return operatorTokenVerdict(transport, "the-gateway-s-operator-token", 1_000);
}

/** An `unauthenticated` answer in `words`, with an ErrorInfo naming `refusal` if one is given. */
function unauthenticated(words: string, refusal?: OperatorTokenRefusal): ConnectError {
  const details =
    refusal === undefined
      ? []
      : [
          {
            desc: ErrorInfoSchema,
            value: create(ErrorInfoSchema, { code: "unauthorized", operatorTokenRefusal: refusal }),
          },
        ];
  return new ConnectError(words, Code.Unauthenticated, undefined, details);
}

/**
 * The gateway judges its operator token by the ErrorInfo of the daemon's answer
 * (operator_token_refusal), whatever its words say: they are for people.
 */
describe("operatorTokenVerdict", () => {
  it("reads the refusal and the acceptance of the token from the ErrorInfo, not the words", async () => {
    expect(
      await verdictOn(unauthenticated("any words", OperatorTokenRefusal.WRONG_GATEWAY_TOKEN)),
    ).toBe("refused");
    expect(await verdictOn(unauthenticated("any words", OperatorTokenRefusal.BEARER_NEEDED))).toBe(
      "accepted",
    );
    // The daemon's words without its ErrorInfo (not the daemon's answer) judge nothing.
    expect(
      await verdictOn(
        unauthenticated("The consent-gateway-token is not this daemon's operator token"),
      ),
    ).toBe(Code.Unauthenticated);
    expect(await verdictOn(unauthenticated("This call needs the operator token"))).toBe(
      Code.Unauthenticated,
    );
  });
});
