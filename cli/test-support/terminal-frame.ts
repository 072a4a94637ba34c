import type { ReactNode } from "react";
import { renderCommand } from "#cli/lifecycle.js";
import { MemoryStream } from "#cli/test-support/memory-io.js";

/**
 * The lines of the final frame a view writes on a terminal `columns` wide, as a command writes it
 * (renderCommand, without the spinner). A line longer than `columns` is one the terminal wraps
 * softly: a copy of it is the whole line.
 */
export async function terminalFrame(view: ReactNode, columns: number): Promise<string[]> {
  const stdout = Object.assign(new MemoryStream(), { isTTY: true, rows: 24, columns });
  const outcome = await renderCommand(
    { task: async () => null, progress: "", view: () => view },
    {
      stdout: stdout as unknown as NodeJS.WriteStream,
      stderr: new MemoryStream() as unknown as NodeJS.WriteStream,
      color: false,
      // vitest's console has no Console constructor for Ink to patch.
      patchConsole: false,
    },
  );
  if (!outcome.ok) throw outcome.error;
  return stdout.text.replace(/\n$/, "").split("\n");
}
