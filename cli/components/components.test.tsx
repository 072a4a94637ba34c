import { render } from "ink-testing-library";
import { describe, expect, it } from "vitest";
import { CheckList, type CheckResult } from "#cli/components/check-list.js";
import { ErrorMessage, renderProblem } from "#cli/components/error-message.js";
import { KeyValue } from "#cli/components/key-value.js";
import { SecretNotice } from "#cli/components/secret-notice.js";
import { Spinner } from "#cli/components/spinner.js";
import type { Problem } from "#cli/problems.js";
import { terminalFrame } from "#cli/test-support/terminal-frame.js";

const problem: Problem = {
  message: "Validation failed.",
  hint: "see consentctl banners create --help",
  code: "",
  details: [
    { field: "configuration.layout", message: "configuration.layout must be one of: banner" },
    { field: "name", message: "name is required" },
  ],
  bug: false,
  cause: new Error("boom"),
};

describe("KeyValue", () => {
  it("aligns values after the longest label", () => {
    const { lastFrame } = render(
      <KeyValue
        fields={[
          { label: "ID", value: "t-1" },
          { label: "Cross-device", value: "yes" },
        ]}
      />,
    );
    expect(lastFrame()).toBe("ID            t-1\nCross-device  yes");
  });

  // Regression: at 40 columns `teams show` cut the team's id in two after the aligned labels.
  it("never cuts an id that fits the width: label and value on a line, or the value below", () => {
    const fields = [
      { label: "ID", value: "14f50966-74ff-4320-b9eb-7bb54c9228ee" },
      { label: "Public ID", value: "ca2b014e-1b74-4f33-996f-5ce595f70c80" },
      { label: "Cross-device", value: "yes" },
    ];
    const at = (width: number) =>
      render(<KeyValue fields={fields} width={width} />)
        .lastFrame()
        ?.split("\n");
    expect(at(50)).toEqual([
      "ID            14f50966-74ff-4320-b9eb-7bb54c9228ee",
      "Public ID     ca2b014e-1b74-4f33-996f-5ce595f70c80",
      "Cross-device  yes",
    ]);
    expect(at(40)).toEqual([
      "ID: 14f50966-74ff-4320-b9eb-7bb54c9228ee",
      "Public ID:",
      "  ca2b014e-1b74-4f33-996f-5ce595f70c80",
      "Cross-device: yes",
    ]);
  });

  // Regression: a CJK name was measured as 9 characters, fitted beside the labels and wrapped.
  it("measures labels and values in terminal columns", () => {
    const fields = [
      { label: "Name", value: "日本語のバナー名前" },
      { label: "Cross-device", value: "yes" },
    ];
    const lines = render(<KeyValue fields={fields} width={24} />)
      .lastFrame()
      ?.split("\n");
    expect(lines).toEqual(["Name: 日本語のバナー名前", "Cross-device: yes"]);
  });

  // Regression: `webhooks show` at 80 columns broke a long URL onto two indented lines, and a
  // copy of it took the line break and the indent along.
  it("prints a value to copy that is wider than the terminal whole, unindented, on a line of its own", async () => {
    const url = `https://hooks.example.com/${"receiver/".repeat(8)}?team=acme`;
    const fields = [
      { label: "ID", value: "14f50966-74ff-4320-b9eb-7bb54c9228ee", copy: true },
      { label: "URL", value: url, copy: true },
      { label: "Description", value: "Receives every consent event of the team's banners" },
    ];
    for (const columns of [80, 40]) {
      const lines = await terminalFrame(<KeyValue fields={fields} />, columns);
      expect(lines.slice(0, 3)).toEqual(["ID: 14f50966-74ff-4320-b9eb-7bb54c9228ee", "URL:", url]);
      // Words still wrap at spaces, inside the terminal, and the words are all there.
      for (const line of lines.slice(3)) expect(line.length).toBeLessThanOrEqual(columns);
      expect(lines.slice(3).join(" ").replace(/\s+/g, " ").trim()).toBe(
        "Description: Receives every consent event of the team's banners",
      );
    }
  });
});

describe("ErrorMessage", () => {
  it("writes control characters of the daemon's words as escapes", () => {
    const hostile = {
      ...problem,
      message: "No banner named x\u001b]0;owned\u0007",
      details: [{ field: "name", message: "name \u009b2J is taken" }],
    };
    const text = renderProblem(hostile, { color: false, columns: 100, debug: false });
    expect(text.replaceAll("\n", "")).not.toMatch(/\p{Cc}/u);
    expect(text).toContain("x\\x1b]0;owned\\x07");
    expect(text).toContain("name \\x9b2J is taken");
  });

  it("prints the sentence, each violated rule and the hint, without a stack", () => {
    const { lastFrame } = render(<ErrorMessage problem={problem} />);
    expect(lastFrame()).toBe(
      [
        "✖ Validation failed.",
        " • configuration.layout must be one of: banner",
        " • name is required",
        "hint: see consentctl banners create --help",
      ].join("\n"),
    );
  });

  it("adds the stack only in debug mode", () => {
    const { lastFrame } = render(<ErrorMessage problem={problem} debug />);
    expect(lastFrame()).toContain("Error: boom");
    expect(lastFrame()).toMatch(/at .*components\.test\.tsx/);
  });

  it("renders to plain text for stderr when colours are off", () => {
    const text = renderProblem(problem, { color: false, columns: 200, debug: false });
    expect(text).not.toContain("\u001b[");
    expect(text.split("\n")[0]).toBe("✖ Validation failed.");
  });
});

describe("SecretNotice", () => {
  it("prints the secret whole on its own line with the once-only warning", () => {
    const secret = `ck_live_${"a".repeat(38)}`;
    const { lastFrame } = render(<SecretNotice label="API key" secret={secret} />);
    const lines = lastFrame()?.split("\n") ?? [];
    expect(lines[0]).toContain("It will not be shown again");
    expect(lines).toContain(secret);
  });

  // Regression: `keys create` and `sessions create` at 40 columns broke the key in two.
  it("prints a secret wider than the terminal whole on one line", async () => {
    const secret = `ck_live_${"a1B2".repeat(11)}`;
    const lines = await terminalFrame(<SecretNotice label="API key" secret={secret} />, 40);
    expect(lines).toContain(secret);
    expect(lines.filter((line) => line.includes("a1B2"))).toEqual([secret]);
  });
});

describe("CheckList", () => {
  it("marks each check and shows hints under failures only", () => {
    const { lastFrame } = render(
      <CheckList
        checks={[
          { name: "config", status: "pass", detail: "ok", hint: "unused" },
          { name: "daemon", status: "fail", detail: "down", hint: "start it" },
          { name: "clock", status: "skip", detail: "skipped: daemon not reachable" },
        ]}
      />,
    );
    expect(lastFrame()).toBe(
      [
        "✔ config  ok",
        "✖ daemon  down",
        "          hint: start it",
        "– clock   skipped: daemon not reachable",
      ].join("\n"),
    );
  });

  it("puts each check's text below its name where a path would not fit beside the names", async () => {
    const checks: CheckResult[] = [
      { name: "token", status: "pass", detail: "found (/var/lib/consent/admin-token)" },
      { name: "token valid", status: "fail", detail: "refused", hint: "pass --token" },
    ];
    expect(await terminalFrame(<CheckList checks={checks} />, 40)).toEqual([
      "✔ token",
      "  found (/var/lib/consent/admin-token)",
      "✖ token valid",
      "  refused",
      "  hint: pass --token",
    ]);
  });

  it("wraps a detail beside the names between words, never inside a time", async () => {
    const checks: CheckResult[] = [
      { name: "clock", status: "pass", detail: "daemon time 2026-11-29 07:43:09Z, in step" },
    ];
    expect(await terminalFrame(<CheckList checks={checks} />, 30)).toEqual([
      "✔ clock  daemon time",
      "         2026-11-29 07:43:09Z,",
      "         in step",
    ]);
  });

  it("shows control characters in what a daemon said escaped, never sends them to the terminal", () => {
    const { lastFrame } = render(
      <CheckList
        checks={[
          {
            name: "daemon",
            status: "fail",
            detail: "The daemon refused: \u001b[31mred\u001b]0;title\u0007.",
            hint: "ask \u001b[2J",
          },
        ]}
      />,
    );
    expect(lastFrame()).toBe(
      [
        "✖ daemon  The daemon refused: \\x1b[31mred\\x1b]0;title\\x07.",
        "          hint: ask \\x1b[2J",
      ].join("\n"),
    );
  });
});

describe("Spinner", () => {
  it("shows its label and animates", async () => {
    const { lastFrame, frames, unmount } = render(<Spinner label="Listing teams…" />);
    expect(lastFrame()).toMatch(/^⠋ Listing teams…$/);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(new Set(frames).size).toBeGreaterThan(1);
    unmount();
  });
});
