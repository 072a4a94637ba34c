import { Text } from "ink";
import { render } from "ink-testing-library";
import { describe, expect, it, vi } from "vitest";
import { CommandRoot, renderCommand } from "#cli/lifecycle.js";
import { MemoryStream } from "#cli/test-support/memory-io.js";

// Ink writes only the final frame when it detects CI (is-in-ci, read when Ink loads); these tests
// look at the frames an operator's terminal shows, so they run as outside CI wherever they run.
vi.hoisted(() => {
  process.env.CI = "false";
  delete process.env.CONTINUOUS_INTEGRATION;
});

const tick = (ms = 20) => new Promise((resolve) => setTimeout(resolve, ms));

describe("CommandRoot", () => {
  it("shows the spinner while the task runs, then the view", async () => {
    let finish: (value: string) => void = () => {};
    const task = () => new Promise<string>((resolve) => (finish = resolve));
    const { lastFrame } = render(
      <CommandRoot
        task={task}
        progress="Creating team…"
        view={(name) => <Text>created {name}</Text>}
      />,
    );
    expect(lastFrame()).toContain("Creating team…");
    finish("Acme");
    await tick();
    expect(lastFrame()).toBe("created Acme");
  });

  it("clears the spinner when the task fails (the error is printed on stderr by the caller)", async () => {
    const { lastFrame } = render(
      <CommandRoot
        task={() => Promise.reject(new Error("no"))}
        progress="Working…"
        view={() => null}
      />,
    );
    await tick();
    expect(lastFrame()).toBe("");
  });
});

describe("renderCommand", () => {
  const streams = () => {
    const stdout = Object.assign(new MemoryStream(), {
      columns: 100,
    }) as unknown as NodeJS.WriteStream;
    const stderr = new MemoryStream() as unknown as NodeJS.WriteStream;
    // vitest's console has no Console constructor for Ink to patch.
    return { stdout, stderr, color: false, patchConsole: false };
  };

  it("exits after the final frame with the view's exit code", async () => {
    const options = streams();
    const outcome = await renderCommand(
      {
        task: () => Promise.resolve(3),
        progress: "Checking…",
        view: (n) => <Text>{n} checks failed</Text>,
        exitCode: (n) => (n > 0 ? 1 : 0),
      },
      options,
    );
    expect(outcome).toEqual({ ok: true, exitCode: 1 });
    expect((options.stdout as unknown as MemoryStream).text).toContain("3 checks failed");
  });

  it("hands a failure back instead of printing it", async () => {
    const options = streams();
    const failure = new Error("daemon said no");
    const outcome = await renderCommand(
      { task: () => Promise.reject(failure), progress: "Working…", view: () => null },
      options,
    );
    expect(outcome).toEqual({ ok: false, error: failure });
    expect((options.stdout as unknown as MemoryStream).text).not.toContain("daemon said no");
  });

  it("writes a settled result as a single frame without erase sequences (piped output)", async () => {
    const options = streams();
    const outcome = await renderCommand(
      {
        task: () => Promise.reject(new Error("not called")),
        settled: { status: "done", value: "ok" },
        progress: "Working…",
        view: (value) => <Text>result: {value}</Text>,
      },
      options,
    );
    expect(outcome).toEqual({ ok: true, exitCode: 0 });
    expect((options.stdout as unknown as MemoryStream).text).toBe("result: ok\n");
  });
});
