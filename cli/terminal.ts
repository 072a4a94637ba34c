import { Writable } from "node:stream";

/** Width given to Ink for piped output: wide enough that no line is ever wrapped or cut. */
export const PIPED_COLUMNS = 10_000;

/**
 * Colours only on a terminal, never with NO_COLOR (no-color.org) or TERM=dumb. Views read this
 * decision rather than chalk's, which looks at stdout alone and ignores NO_COLOR.
 */
export function colorEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (env.TERM === "dumb") return false;
  return stream.isTTY === true;
}

/**
 * A stand-in for a piped stdout that reports a very wide "terminal". Ink lays out to
 * `stdout.columns` and, without one, guesses 80, which would cut ids in `teams list | awk`.
 * Tables are fitted to a real terminal only; piped output keeps every character.
 */
export function pipedStream(target: NodeJS.WritableStream): NodeJS.WriteStream {
  const stream = new Writable({
    write(chunk, _encoding, done) {
      target.write(chunk, (error) => done(error ?? undefined));
    },
  });
  return Object.assign(stream, {
    columns: PIPED_COLUMNS,
    isTTY: false,
  }) as unknown as NodeJS.WriteStream;
}
